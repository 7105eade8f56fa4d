"""Opt-in import aliases, so that public NKI kernels and TorchNeuron scripts run unmodified.

After :func:`install` (or with ``TORCHNEURON_EXT_NKI_COMPAT=1`` in the environment when
``torchneuron_ext`` is imported, which ``import torch`` does), these imports resolve here, but only
for top-level packages that are not installed (the real toolchain always wins):

- ``neuronxcc.nki``, ``neuronxcc.nki.language``, ``.isa``, ``.typing``: the legacy dialect
  (``torchneuron_ext.nki.legacy``);
- ``nki``, ``nki.language``, ``nki.isa``, ``nki.typing``: the new dialect (``torchneuron_ext.nki``);
- ``torch_neuronx``: ``nki_op``, ``wrap_nki`` and ``nki`` (as in TorchNeuron), ``nki_jit`` (the
  legacy decorator of the XLA-based torch-neuronx), the op-tracking functions, and the submodules
  ``torch_neuronx.nki_hop`` and ``torch_neuronx.profiling``.

``python -m torchneuron_ext.nki.compat script.py [args]`` runs a script with the aliases installed.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import types
from typing import Any, Optional, Sequence

__all__ = ["install", "uninstall", "installed", "ENV_VAR"]

ENV_VAR = "TORCHNEURON_EXT_NKI_COMPAT"

# alias -> module it stands for; None: a namespace made here (see _facade).
_ALIASES: dict[str, Optional[str]] = {
    "neuronxcc": None,
    "neuronxcc.nki": "torchneuron_ext.nki.legacy",
    "neuronxcc.nki.language": "torchneuron_ext.nki.legacy.language",
    "neuronxcc.nki.isa": "torchneuron_ext.nki.legacy.isa",
    "neuronxcc.nki.typing": "torchneuron_ext.nki.legacy.typing",
    "nki": "torchneuron_ext.nki",
    "nki.language": "torchneuron_ext.nki.language",
    "nki.isa": "torchneuron_ext.nki.isa",
    "nki.typing": "torchneuron_ext.nki.typing",
    "torch_neuronx": None,
    "torch_neuronx.nki_hop": None,
    "torch_neuronx.profiling": "torchneuron_ext.profiling",
    # Neuron's custom C++ operator workflow (custom_op.load / load_library), see docs/custom_ops.md.
    "torch_neuronx.xla_impl": None,
    "torch_neuronx.xla_impl.custom_op": "torchneuron_ext.custom_op",
}
_TOP_LEVEL = ("neuronxcc", "nki", "torch_neuronx")


def _facade(name: str) -> types.ModuleType:
    module = types.ModuleType(name, f"torchneuron_ext's stand-in for {name} (torchneuron_ext.nki.compat)")
    if name in ("neuronxcc", "torch_neuronx.xla_impl"):
        module.__path__ = []  # a package, so that its submodules can be imported from it
    elif name in ("torch_neuronx", "torch_neuronx.nki_hop"):
        from . import torch_ops
        module.nki_op = torch_ops.nki_op
        module.wrap_nki = torch_ops.wrap_nki
        if name == "torch_neuronx":
            import torchneuron_ext
            from torchneuron_ext import ops
            module.__path__ = []
            module.nki = importlib.import_module("torchneuron_ext.nki")
            # The XLA-era decorator (SDK <= 2.23): legacy-dialect kernels, often with outputs passed in.
            module.nki_jit = importlib.import_module("torchneuron_ext.nki.legacy").jit
            for fn in ("get_executed_ops", "get_fallback_ops", "clear_op_tracking", "get_op_counts"):
                setattr(module, fn, getattr(ops, fn))
            module.__version__ = torchneuron_ext.__version__
    return module


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target: Optional[str]) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Optional[types.ModuleType]:
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        name = module.__name__
        # The import system returns whatever sys.modules holds for the name once this returns, so the
        # alias is the very module object it stands for (one module, not a copy with its own state).
        sys.modules[name] = importlib.import_module(self.target) if self.target else _facade(name)


class _AliasFinder(importlib.abc.MetaPathFinder):
    def __init__(self) -> None:
        self._real: dict[str, bool] = {}

    def _really_installed(self, top: str) -> bool:
        if top not in self._real:
            self._real[top] = importlib.machinery.PathFinder.find_spec(top) is not None
        return self._real[top]

    def find_spec(self, name: str, path: Optional[Sequence[str]], target: Any = None) -> Any:
        top = name.partition(".")[0]
        if top not in _TOP_LEVEL or self._really_installed(top):
            return None
        if name not in _ALIASES:
            provided = ", ".join(a for a in _ALIASES if a.partition(".")[0] == top)
            raise ModuleNotFoundError(
                f"No module named '{name}': torchneuron_ext stands in for {top} with {provided} only "
                f"(the real package is not installed); see docs/nki.md for what the NKI simulator models",
                name=name)
        return importlib.machinery.ModuleSpec(name, _AliasLoader(_ALIASES[name]), is_package=True)


_finder: Optional[_AliasFinder] = None


def install() -> None:
    """Make ``neuronxcc.nki*``, ``nki*`` and ``torch_neuronx`` importable when they are not installed."""
    global _finder
    if _finder is None:
        _finder = _AliasFinder()
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)


def uninstall() -> None:
    """Undo :func:`install`: remove the finder and forget aliased modules already imported."""
    if _finder is not None and _finder in sys.meta_path:
        sys.meta_path.remove(_finder)
    for name in list(sys.modules):
        if name in _ALIASES and not _is_real(name):
            del sys.modules[name]


def installed() -> bool:
    return _finder is not None and _finder in sys.meta_path


def _is_real(name: str) -> bool:
    top = name.partition(".")[0]
    return _finder is not None and _finder._really_installed(top)


def _install_from_env() -> None:
    value = os.environ.get(ENV_VAR, "").strip().lower()
    if value in ("", "0", "false", "off", "no"):
        return
    if value not in ("1", "true", "on", "yes"):
        # A warning, not an error: this runs inside `import torch` (the backend's autoload).
        import warnings
        warnings.warn(f"{ENV_VAR}={os.environ[ENV_VAR]!r} is not understood: use 1 to install the NKI import "
                      f"aliases (neuronxcc.nki, nki, torch_neuronx), 0 not to; they are not installed",
                      stacklevel=2)
        return
    install()


def _main(argv: list) -> int:
    import runpy
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m torchneuron_ext.nki.compat script.py [args...]\n"
              "Runs the script with neuronxcc.nki, nki and torch_neuronx resolving to torchneuron_ext.")
        return 0 if argv else 2
    install()
    sys.argv = list(argv)
    runpy.run_path(argv[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
