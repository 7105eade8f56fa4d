"""Opt-in import aliases, so that public NKI kernels and TorchNeuron scripts run unmodified.

After :func:`install` (or with ``TORCHNEURON_EXT_NKI_COMPAT=1`` in the environment when
``torchneuron_ext`` is imported, which ``import torch`` does), these imports resolve here, but only
for top-level packages that are not installed (the real toolchain always wins):

- ``neuronxcc.nki``, ``neuronxcc.nki.language``, ``.isa``, ``.typing``: the legacy dialect
  (``torchneuron_ext.nki.legacy``);
- ``nki``, ``nki.language``, ``nki.isa``, ``nki.typing``: the new dialect (``torchneuron_ext.nki``);
- ``torch_neuronx`` and its submodules: ``torchneuron_ext.torch_neuronx`` (TorchNeuron's public surface:
  device and stream helpers, ``utils``, ``distributed``, ``nki_op``, ``wrap_nki``, ``nki``, ``nki_jit``,
  op tracking, ``nki_hop``, ``profiling``; see docs/torch_neuronx.md).

``python -m torchneuron_ext.nki.compat script.py [args]`` (or ``-m module [args]``, e.g. ``-m pytest``)
runs a script or module with the aliases installed. ``--install-hook`` writes a ``.pth`` start-up hook
into site-packages (startup.py), so that with ``TORCHNEURON_EXT_NKI_COMPAT=1`` a plain ``python kernel.py``
or ``pytest`` whose first import is ``neuronxcc.nki`` finds the simulator; ``--uninstall-hook`` removes it.
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
    "neuronxcc.nki.compiler": "torchneuron_ext.nki.compiler",
    # Internal toolchain modules public kernels import type names from (for annotations).
    "neuronxcc.nki.compiler.backends": None,
    "neuronxcc.nki.compiler.backends.neuron": None,
    "neuronxcc.nki.compiler.backends.neuron.tensor": None,
    "neuronxcc.nki.compiler.backends.neuron.indexing": None,
    "nki": "torchneuron_ext.nki",
    "nki.language": "torchneuron_ext.nki.language",
    "nki.isa": "torchneuron_ext.nki.isa",
    "nki.typing": "torchneuron_ext.nki.typing",
    "nki.compiler": "torchneuron_ext.nki.compiler",
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
    if name in ("neuronxcc", "torch_neuronx.xla_impl", "neuronxcc.nki.compiler.backends",
                "neuronxcc.nki.compiler.backends.neuron"):
        module.__path__ = []  # a package, so that its submodules can be imported from it
    elif name == "neuronxcc.nki.compiler.backends.neuron.tensor":
        from .tensor import NKITensor
        module.local_tile = module.Tensor = NKITensor  # the class of tiles
    elif name == "neuronxcc.nki.compiler.backends.neuron.indexing":
        from .indexing import IndexExpr
        module.TileIndex = IndexExpr  # the class of arange/mgrid index expressions
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
        if top == "torch_neuronx":  # TorchNeuron's surface is torchneuron_ext.torch_neuronx (docs/torch_neuronx.md)
            from ..torch_neuronx import _importer
            return _importer.find_spec(name)
        if name not in _ALIASES:
            provided = ", ".join(a for a in _ALIASES if a.partition(".")[0] == top and ".backends" not in a)
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


_USAGE = """usage: python -m torchneuron_ext.nki.compat script.py [args...]
       python -m torchneuron_ext.nki.compat -m module [args...]     (e.g. -m pytest test/unit)
       python -m torchneuron_ext.nki.compat --install-hook [site-packages dir]
       python -m torchneuron_ext.nki.compat --uninstall-hook [site-packages dir]
Runs a script or module with neuronxcc.nki, nki and torch_neuronx resolving to torchneuron_ext. The hook
makes TORCHNEURON_EXT_NKI_COMPAT=1 work for any interpreter of this environment, whatever it imports first."""


def hook_path(directory: Optional[str] = None) -> str:
    """Where the start-up hook's .pth file goes: this environment's site-packages unless given."""
    import sysconfig
    from .startup import PTH_NAME
    return os.path.join(directory or sysconfig.get_paths()["purelib"], PTH_NAME)


def install_hook(directory: Optional[str] = None) -> str:
    """Write the .pth start-up hook (see startup.py); returns its path."""
    from .startup import PTH_LINE
    path = hook_path(directory)
    with open(path, "w") as f:
        f.write("# torchneuron_ext: NKI import aliases when TORCHNEURON_EXT_NKI_COMPAT=1 (docs/nki.md)\n")
        f.write(PTH_LINE)
    return path


def uninstall_hook(directory: Optional[str] = None) -> Optional[str]:
    path = hook_path(directory)
    if os.path.exists(path):
        os.remove(path)
        return path
    return None


def _main(argv: list) -> int:
    import runpy
    if not argv or argv[0] in ("-h", "--help"):
        print(_USAGE)
        return 0 if argv else 2
    if argv[0] in ("--install-hook", "--uninstall-hook"):
        directory = argv[1] if len(argv) > 1 else None
        if argv[0] == "--install-hook":
            print(f"wrote {install_hook(directory)}")
        else:
            removed = uninstall_hook(directory)
            print(f"removed {removed}" if removed else f"no hook at {hook_path(directory)}")
        return 0
    install()
    if argv[0] == "-m":
        if len(argv) < 2:
            print(_USAGE, file=sys.stderr)
            return 2
        sys.argv = [argv[1]] + list(argv[2:])
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        return 0
    sys.argv = list(argv)
    sys.path.insert(0, os.path.dirname(os.path.abspath(argv[0])))  # as `python script.py` does
    runpy.run_path(argv[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
