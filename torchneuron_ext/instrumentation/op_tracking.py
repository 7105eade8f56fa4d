"""Which operators ran on the device and by which path (TorchNeuron's op tracking)."""
from __future__ import annotations

from .. import _C


def get_op_counts() -> dict[str, dict[str, int]]:
    """{operator: {tier: calls}} for every operator run on neuron since the last clear."""
    out: dict[str, dict[str, int]] = {}
    for name, tier, calls in _C._op_counts():
        out.setdefault(name, {})[tier] = out.get(name, {}).get(tier, 0) + int(calls)
    return dict(sorted(out.items()))


def get_executed_ops() -> list[str]:
    """Names of the ATen operators that ran on neuron (any path), sorted."""
    return sorted({name for name, _, _ in _C._op_counts()})


def get_fallback_ops() -> list[str]:
    """Operators that took the generic path (a host kernel over zero-copy views), sorted."""
    return sorted({name for name, tier, _ in _C._op_counts() if tier == "generic"})


def clear_op_tracking() -> None:
    """Forget the operators recorded so far."""
    _C._clear_op_tracking()


def warn_on_generic_path(enabled: bool = True) -> None:
    """Warn once per operator that runs on the generic path (also: TORCHNEURON_EXT_WARN_FALLBACK=1)."""
    _C._set_warn_on_generic(bool(enabled))
