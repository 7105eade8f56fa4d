"""nn.SyncBatchNorm under DDP on two neuron ranks matches single-process BatchNorm (issue 19);
the operators themselves are tested in tests/aten/test_sync_batch_norm.py."""
from __future__ import annotations

import pytest

from .launcher import assert_check, run_job

CHECKS = ["sync_batch_norm_2d_matches_single_process", "sync_batch_norm_uneven_batches",
          "sync_batch_norm_channels_last", "sync_batch_norm_1d", "sync_batch_norm_ops_ran_on_neuron"]


@pytest.fixture(scope="module")
def job() -> list:
    return run_job(module="tests.distributed.workers.sync_batch_norm", timeout=170)


@pytest.mark.parametrize("check", CHECKS)
def test_sync_batch_norm(job: list, check: str) -> None:
    assert_check(job, check)
