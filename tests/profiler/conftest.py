import pytest


@pytest.fixture(autouse=True)
def _default_projection_target(monkeypatch):
    """Reports pin the cost model's projections on its default target (trn2, LNC=2): a developer's
    NEURON_EMU_TARGET or NKI_TARGET must not change them."""
    monkeypatch.delenv("NEURON_EMU_TARGET", raising=False)
    monkeypatch.delenv("NKI_TARGET", raising=False)
