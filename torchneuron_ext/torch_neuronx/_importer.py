"""How the name ``torch_neuronx`` (and its submodules) resolves to this package.

``torch_neuronx.X`` is ``torchneuron_ext.torch_neuronx.X`` (the very module object, not a copy), except
the submodules listed in ``_TARGETS`` that live elsewhere in torchneuron_ext. Out-of-scope submodules
(TorchNeuron's lowering internals, see _scope.py) raise a ModuleNotFoundError that names the limitation.

Two users: torchneuron_ext.nki.compat's finder delegates ``torch_neuronx*`` names here (only when the
real TorchNeuron is not installed), and the test-suite plugin installs :class:`ForcedFinder`, which wins
even over a TorchNeuron source checkout on sys.path (its package cannot run without Trainium's _C).
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from typing import Any, Optional, Sequence

from . import _scope

PACKAGE = "torchneuron_ext.torch_neuronx"

# torch_neuronx submodules that are other torchneuron_ext modules.
_TARGETS = {
    "torch_neuronx.profiling": "torchneuron_ext.profiling",
    "torch_neuronx.xla_impl.custom_op": "torchneuron_ext.custom_op",
}


def target_of(name: str) -> Optional[str]:
    """The torchneuron_ext module that ``name`` (torch_neuronx or a submodule) stands for, None if none."""
    if name in _TARGETS:
        return _TARGETS[name]
    if name == "torch_neuronx":
        return PACKAGE
    if not name.startswith("torch_neuronx."):
        return None
    candidate = PACKAGE + name[len("torch_neuronx"):]
    try:
        found = importlib.util.find_spec(candidate)
    except ModuleNotFoundError:
        found = None
    return candidate if found is not None else None


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Optional[types.ModuleType]:
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        # The import system returns what sys.modules holds for the name once this returns: the alias is
        # the target module itself.
        sys.modules[module.__name__] = importlib.import_module(self.target)


def find_spec(name: str) -> importlib.machinery.ModuleSpec:
    """A spec that makes ``name`` the torchneuron_ext module it stands for; ModuleNotFoundError otherwise."""
    target = target_of(name)
    if target is None:
        raise _scope.missing_module_error(name)
    return importlib.machinery.ModuleSpec(name, _AliasLoader(target), is_package=True)


class ForcedFinder(importlib.abc.MetaPathFinder):
    """``torch_neuronx*`` resolves here whatever else is on sys.path (the test-suite plugin's finder)."""

    def find_spec(self, name: str, path: Optional[Sequence[str]], target: Any = None) -> Any:
        if name != "torch_neuronx" and not name.startswith("torch_neuronx."):
            return None
        return find_spec(name)


_forced: Optional[ForcedFinder] = None


def force() -> None:
    """Make ``torch_neuronx`` this package even when another torch_neuronx is importable; forget any
    torch_neuronx modules imported before."""
    global _forced
    if _forced is None:
        _forced = ForcedFinder()
    if _forced in sys.meta_path:
        sys.meta_path.remove(_forced)
    sys.meta_path.insert(0, _forced)
    for mod in [m for m in sys.modules if m == "torch_neuronx" or m.startswith("torch_neuronx.")]:
        if not getattr(sys.modules[mod], "__name__", "").startswith("torchneuron_ext"):
            del sys.modules[mod]


def unforce() -> None:
    if _forced is not None and _forced in sys.meta_path:
        sys.meta_path.remove(_forced)
