"""One 2-rank job runs every collective check; test_collectives and test_faults read its results."""
from __future__ import annotations

import pytest

from .launcher import run_job


@pytest.fixture(scope="session")
def neuron_job() -> list:
    return run_job()
