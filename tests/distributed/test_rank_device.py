"""neuron:LOCAL_RANK: the numbering TorchNeuron gives a distributed job, from torchrun's environment
(taken at import) and from the process group's setup (ranks found through the store)."""
from __future__ import annotations

import pytest

from .launcher import assert_check, run_job

CHECKS = ["numbering", "other_cores_refused", "seed_followed_the_core", "backward_on_the_rank_core", "collective"]


@pytest.fixture(scope="module", params=["torchrun_env", "store"])
def job(request: pytest.FixtureRequest) -> list:
    env = {"LOCAL_WORLD_SIZE": ""} if request.param == "store" else {}
    return run_job(module="tests.distributed.workers.rank_device", env=env, timeout=120)


@pytest.mark.parametrize("check", CHECKS)
def test_rank_device(job: list, check: str) -> None:
    assert_check(job, check)
