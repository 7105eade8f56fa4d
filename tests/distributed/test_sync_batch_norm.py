"""nn.SyncBatchNorm under DDP on two neuron ranks matches single-process BatchNorm (issue 19);
the operators themselves are tested in tests/aten/test_sync_batch_norm.py."""
from __future__ import annotations

from .launcher import worker_checks

CHECKS = ["sync_batch_norm_2d_matches_single_process", "sync_batch_norm_uneven_batches",
          "sync_batch_norm_channels_last", "sync_batch_norm_1d", "sync_batch_norm_ops_ran_on_neuron"]


job, test_sync_batch_norm = worker_checks("tests.distributed.workers.sync_batch_norm", CHECKS, timeout=170)
