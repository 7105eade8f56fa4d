"""nn.SyncBatchNorm under DDP on two neuron ranks matches single-process BatchNorm (issue 19);
the operators themselves are tested in tests/aten/test_sync_batch_norm.py."""
from __future__ import annotations

import pytest

from .launcher import run_ranks

CHECKS = ["sync_batch_norm_2d_matches_single_process", "sync_batch_norm_uneven_batches",
          "sync_batch_norm_channels_last", "sync_batch_norm_1d", "sync_batch_norm_ops_ran_on_neuron"]


@pytest.fixture(scope="module")
def job() -> list:
    ranks = run_ranks("tests.distributed.workers.sync_batch_norm", timeout=170)
    for r in ranks:
        assert r.returncode == 0, f"rank {r.rank} exited with {r.returncode}:\n{r.output[-4000:]}"
    return ranks


@pytest.mark.parametrize("check", CHECKS)
def test_sync_batch_norm(job: list, check: str) -> None:
    for r in job:
        assert r.result.get(check) == "ok", f"rank {r.rank}: {r.result.get(check, 'not run')}"
