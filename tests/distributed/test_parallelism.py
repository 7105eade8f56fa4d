"""DDP (the example, under torchrun), FSDP2, DTensor tensor parallelism and compiled
functional collectives on neuron, each matched against single-process training."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from .launcher import REPO, free_port, worker_checks

CHECKS = ["fsdp2_matches_single_process", "dtensor_tensor_parallel_linear", "dtensor_attention",
          "compiled_functional_collectives", "ddp_bucketed_gradients"]


job, test_parallelism = worker_checks("tests.distributed.workers.parallelism", CHECKS, timeout=170)


def test_ddp_example_under_torchrun_matches_single_process(tmp_path) -> None:
    out = tmp_path / "losses.json"
    env = {k: v for k, v in os.environ.items() if k not in ("NEURON_RT_VISIBLE_CORES", "NEURON_RT_NUM_CORES")}
    env["OMP_NUM_THREADS"] = "1"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", f"--master-port={free_port()}",
           "examples/ddp_train.py", "--steps", "6", "--json", str(out)]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # torchrun's LOCAL_RANK gave each rank its own core.
    assert "rank 0/2: NEURON_RT_VISIBLE_CORES=0" in proc.stdout and "rank 1/2: NEURON_RT_VISIBLE_CORES=1" in proc.stdout
    losses = json.load(open(out))
    assert losses["world_size"] == 2 and len(losses["ddp"]) == 6
    assert losses["ddp"][-1] < losses["ddp"][0]  # it trains
    for a, b in zip(losses["ddp"], losses["single"]):
        assert abs(a - b) < 1e-5, (losses["ddp"], losses["single"])
