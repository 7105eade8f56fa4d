"""Every collective on neuron tensors across 2 processes, against CPU arithmetic.

One 2-rank job runs all checks (process start-up dominates the cost); each
test below asserts on its own check, on both ranks.
"""
from __future__ import annotations

import pytest

from .launcher import assert_check, run_job

CHECKS = ["device_per_rank", "backend_names", "all_reduce_ops", "all_reduce_dtypes", "functional_coalesced_average",
          "async_work_and_future", "dropped_async_work_keeps_tensors", "all_gather_forms", "reduce_scatter_forms",
          "broadcast_reduce_gather_scatter", "all_to_all_uneven", "point_to_point", "coalesced_forms", "subgroups",
          "cpu_tensors_and_objects", "barrier_and_views", "profiler_lane_and_timing"]
MIXED_CHECKS = ["backend_names", "all_reduce_ops", "async_work_and_future", "all_gather_forms", "all_to_all_uneven",
                "point_to_point", "subgroups", "cpu_tensors_and_objects"]


@pytest.fixture(scope="module")
def mixed_job() -> list:
    # CPU tensors through plain gloo, neuron tensors through ours, in one group.
    return run_job({"TNX_BACKEND": "cpu:gloo,neuron:neuron"})


@pytest.mark.parametrize("check", CHECKS)
def test_collective(neuron_job: list, check: str) -> None:
    assert_check(neuron_job, check)


@pytest.mark.parametrize("check", MIXED_CHECKS)
def test_mixed_backend_string(mixed_job: list, check: str) -> None:
    assert_check(mixed_job, check)
