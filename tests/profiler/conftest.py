import pytest


@pytest.fixture(autouse=True)
def _default_projection_target(monkeypatch):
    """Reports pin the cost model's projections on its default target (trn2, LNC=2): a developer's
    NEURON_EMU_TARGET, NKI_TARGET or NEURON_PLATFORM_TARGET_OVERRIDE must not change them."""
    for var in ("NEURON_EMU_TARGET", "NKI_TARGET", "NEURON_PLATFORM_TARGET_OVERRIDE"):
        monkeypatch.delenv(var, raising=False)
