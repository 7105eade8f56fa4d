"""Runs a worker module as N ranks, torchrun-style, with a hard timeout.

Each rank is a fresh `python -m <module>` process with RANK / WORLD_SIZE /
LOCAL_RANK / MASTER_ADDR / MASTER_PORT set, so the backend's per-rank core
selection is exercised as under torchrun. Workers write a JSON result per
rank; a rank that hangs is killed, so a bug never hangs CI.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from typing import Any

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclass
class RankResult:
    rank: int
    returncode: int | None  # None: killed at the timeout
    output: str
    result: dict[str, Any]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(module: str, world_size: int = 2, timeout: float = 90.0, env: dict[str, str] | None = None,
              args: list[str] | None = None) -> list[RankResult]:
    with tempfile.TemporaryDirectory() as out_dir:
        port = free_port()
        procs = []
        for rank in range(world_size):
            e = {k: v for k, v in os.environ.items() if k not in ("NEURON_RT_VISIBLE_CORES", "NEURON_RT_NUM_CORES")}
            e.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world_size), LOCAL_WORLD_SIZE=str(world_size),
                     MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), TNX_RESULT_DIR=out_dir,
                     PYTHONPATH=REPO + os.pathsep + e.get("PYTHONPATH", ""), OMP_NUM_THREADS="1")
            e.update(env or {})
            procs.append(subprocess.Popen([sys.executable, "-m", module, *(args or [])], cwd=REPO, env=e,
                                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        results = []
        for rank, p in enumerate(procs):
            try:
                out, _ = p.communicate(timeout=timeout)
                code: int | None = p.returncode
            except subprocess.TimeoutExpired:
                for q in procs:
                    q.kill()
                out, _ = p.communicate()
                code = None
            path = os.path.join(out_dir, f"rank{rank}.json")
            data = json.load(open(path)) if os.path.exists(path) else {}
            results.append(RankResult(rank, code, out, data))
        return results


def run_job(env: dict[str, str] | None = None, module: str = "tests.distributed.workers.collectives",
            timeout: float = 150) -> list[RankResult]:
    """A worker module (default: the collectives) on 2 ranks; every rank must exit cleanly."""
    ranks = run_ranks(module, env=env, timeout=timeout)
    for r in ranks:
        assert r.returncode == 0, f"rank {r.rank} exited with {r.returncode}:\n{r.output[-4000:]}"
    return ranks


def assert_check(ranks: list[RankResult], check: str) -> None:
    """One named check of a job passed on every rank."""
    for r in ranks:
        assert r.result.get(check) == "ok", f"rank {r.rank}: {r.result.get(check, 'not run')}"


def worker_checks(module: str, checks: list[str], timeout: float = 150) -> tuple[Any, Any]:
    """For a test module whose whole job is one worker module's named checks: a module-scoped fixture that
    runs the worker once on 2 ranks, and a test with one case per check. Bind them as `job` and
    `test_<name>` at module level, where pytest collects them."""
    import pytest  # here, not at the top: the workers import this module and run without pytest

    @pytest.fixture(scope="module")
    def job() -> list[RankResult]:
        return run_job(module=module, timeout=timeout)

    @pytest.mark.parametrize("check", checks)
    def test(job: list[RankResult], check: str) -> None:
        assert_check(job, check)

    return job, test


def write_result(result: dict[str, Any]) -> None:
    """Called by a worker: store this rank's result for the launcher."""
    path = os.path.join(os.environ["TNX_RESULT_DIR"], f"rank{os.environ['RANK']}.json")
    with open(path + ".tmp", "w") as f:
        json.dump(result, f)
    os.replace(path + ".tmp", path)


class Checks:
    """Named checks inside a worker; one failure does not stop the others."""

    def __init__(self) -> None:
        self.results: dict[str, str] = {}

    def run(self, name: str, fn: Any) -> None:
        try:
            fn()
            self.results[name] = "ok"
        except Exception as e:  # noqa: BLE001 - the message is the test's evidence
            import traceback
            self.results[name] = f"{type(e).__name__}: {e}\n{traceback.format_exc()}"
