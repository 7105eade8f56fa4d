"""The one import finder of torchneuron_ext: other products' module names, and this package's old paths.

Other products' names (opt-in): after :func:`install` (or with ``TORCHNEURON_EXT_NKI_COMPAT=1`` when
``torchneuron_ext`` is imported, which ``import torch`` does), these imports resolve to torchneuron_ext,
but only for top-level packages that are not installed (the real toolchain always wins):

- ``neuronxcc.nki``, ``neuronxcc.nki.language``, ``.isa``, ``.typing``: the legacy dialect
  (``torchneuron_ext.nki.legacy``);
- ``nki``, ``nki.language``, ``nki.isa``, ``nki.typing``: the new dialect (``torchneuron_ext.nki``);
- ``nki_cpu_simulator.nki*`` (the name AWS's NKI Library harness imports the simulator by), ``neuron_dtypes``
  and ``neuronxcc.starfish.support.dtype`` (compat/neuron_dtypes.py): what AWS's NKI Library tests import;
- ``torch_neuronx`` and its submodules: ``torchneuron_ext.compat.torch_neuronx`` (TorchNeuron's public
  surface, see docs/torch_neuronx.md). Out-of-scope submodules (TorchNeuron's lowering internals, see
  torch_neuronx/_scope.py) raise a ModuleNotFoundError that names the limitation. :func:`force` makes
  ``torch_neuronx`` resolve here even when another one is importable (the test-suite plugin's mode: a
  TorchNeuron source checkout cannot run without Trainium's _C).

Old paths (always): modules that moved into compat/ keep their former names through the same finder
(``torchneuron_ext.torch_neuronx*``, ``torchneuron_ext.testing*``, ``torchneuron_ext.profiling``); the stub
left at each old path calls :func:`rename`.

Every alias is the very module object it stands for, never a second copy with its own state.
``python -m torchneuron_ext.compat`` runs scripts with the aliases installed (__main__.py); the
interpreter start-up hook is startup.py.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from typing import Any, Optional, Sequence

from .. import _env

__all__ = ["ENV_VAR", "force", "install", "install_from_environment", "installed", "rename", "supply_missing",
           "uninstall", "unforce", "withdraw_missing"]

ENV_VAR = "TORCHNEURON_EXT_NKI_COMPAT"

TORCH_NEURONX = "torchneuron_ext.compat.torch_neuronx"

# Alias -> module it stands for; None: a namespace made here (see _facade). torch_neuronx.X is
# TORCH_NEURONX.X by rule (_torch_neuronx_target), so only its exception is listed.
_PRODUCTS: dict[str, Optional[str]] = {
    "neuronxcc": None,
    "neuronxcc.nki": "torchneuron_ext.nki.legacy",
    "neuronxcc.nki.language": "torchneuron_ext.nki.legacy.language",
    "neuronxcc.nki.isa": "torchneuron_ext.nki.legacy.isa",
    "neuronxcc.nki.isa.constants": "torchneuron_ext.nki.legacy.isa.constants",
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
    "nki.isa.constants": "torchneuron_ext.nki.isa.constants",
    "nki.language.dtypes": "torchneuron_ext.nki.language.dtypes",
    "nki.typing": "torchneuron_ext.nki.typing",
    "nki.compiler": "torchneuron_ext.nki.compiler",
    "nki.compiler.frontend": "torchneuron_ext.nki.frontend",
    "nki.collectives": "torchneuron_ext.nki.collectives",
    # AWS's NKI Library harness (docs/nki.md, "Running AWS's NKI Library"): the module names it imports the
    # simulator by (its internal package nki_cpu_simulator, whose nki is this nki), the modules it aliases
    # (nki.tensor, nki.dtype, nki.builtin), the simulator's function entry point, and the toolchain's numpy
    # dtype helpers (neuron_dtypes; static_cast's former home in neuronxcc.starfish).
    "nki.tensor": "torchneuron_ext.nki.tensor",
    "nki.dtype": "torchneuron_ext.nki.language.dtypes",
    "nki.builtin": "torchneuron_ext.nki.builtin",
    "nki.simulator": "torchneuron_ext.nki.simulator",
    "nki_cpu_simulator": None,  # and nki_cpu_simulator.nki.X is nki.X by rule (_product_target)
    "neuron_dtypes": "torchneuron_ext.compat.neuron_dtypes",
    "neuronxcc.starfish": None,
    "neuronxcc.starfish.support": None,
    "neuronxcc.starfish.support.dtype": "torchneuron_ext.compat.neuron_dtypes",
    # Neuron's custom C++ operator workflow (custom_op.load / load_library), see docs/custom_ops.md.
    "torch_neuronx.xla_impl.custom_op": "torchneuron_ext.custom_op",
}
_TOP_LEVEL = ("neuronxcc", "nki", "torch_neuronx", "nki_cpu_simulator", "neuron_dtypes")

# Old path -> where the module lives now (a package's submodules follow it).
_RENAMED: dict[str, str] = {
    "torchneuron_ext.torch_neuronx": TORCH_NEURONX,
    "torchneuron_ext.testing": "torchneuron_ext.compat.testing",
    "torchneuron_ext.profiling": TORCH_NEURONX + ".profiling",
}


def _facade(name: str) -> types.ModuleType:
    module = types.ModuleType(name, f"torchneuron_ext's stand-in for {name} (torchneuron_ext.compat.aliases)")
    if name in ("neuronxcc", "neuronxcc.nki.compiler.backends", "neuronxcc.nki.compiler.backends.neuron",
                "neuronxcc.starfish", "neuronxcc.starfish.support", "nki_cpu_simulator"):
        module.__path__ = []  # a package, so that its submodules can be imported from it
    elif name == "neuronxcc.nki.compiler.backends.neuron.tensor":
        from ..nki.tensor import NKITensor
        module.local_tile = module.Tensor = NKITensor  # the class of tiles
    elif name == "neuronxcc.nki.compiler.backends.neuron.indexing":
        from ..nki.indexing import IndexExpr
        module.TileIndex = IndexExpr  # the class of arange/mgrid index expressions
    return module


_SIMULATOR = "nki_cpu_simulator"
_MISSING = "<not an alias>"


def _product_target(name: str) -> Optional[str]:
    """The module the product alias ``name`` stands for (None: a facade; _MISSING: no such alias).
    ``nki_cpu_simulator.nki.X`` is ``nki.X``, whatever ``nki`` submodules there are."""
    if name == _SIMULATOR + ".nki" or name.startswith(_SIMULATOR + ".nki."):
        name = name[len(_SIMULATOR) + 1:]
    return _PRODUCTS.get(name, _MISSING)


def _torch_neuronx_target(name: str) -> str:
    """The module ``name`` (torch_neuronx or a submodule) stands for; ModuleNotFoundError if none."""
    if name in _PRODUCTS:
        return _PRODUCTS[name]
    candidate = TORCH_NEURONX + name[len("torch_neuronx"):]
    try:
        found = importlib.util.find_spec(candidate)
    except ModuleNotFoundError:
        found = None
    if found is None:
        from .torch_neuronx import _scope
        raise _scope.missing_module_error(name)
    return candidate


def _renamed_target(name: str) -> Optional[str]:
    for old, new in _RENAMED.items():
        if name == old or name.startswith(old + "."):
            return new + name[len(old):]
    return None


def is_real_package(spec: Any) -> bool:
    """A module or package the path finder found, as opposed to nothing or a namespace package: a folder with
    no ``__init__.py`` that happens to share the name (a user's ``nki/`` folder of kernels in the working
    directory, this repository's examples/nki) is not AWS's package and must not switch the aliases off."""
    return spec is not None and spec.origin not in (None, "namespace")


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target: Optional[str], package: bool = False) -> None:
        self.target, self.package = target, package

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Optional[types.ModuleType]:
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        name = module.__name__
        # The import system returns whatever sys.modules holds for the name once this returns, so the
        # alias is the very module object it stands for (one module, not a copy with its own state).
        sys.modules[name] = importlib.import_module(self.target) if self.target else _facade(name)
        if self.package and not hasattr(sys.modules[name], "__path__"):
            sys.modules[name].__path__ = []

    def get_code(self, fullname: str) -> Any:
        # `python -m <old path>` (runpy) runs the target's code as __main__.
        spec = importlib.util.find_spec(self.target) if self.target else None
        return spec.loader.get_code(self.target) if spec is not None else None


class AliasFinder(importlib.abc.MetaPathFinder):
    """Resolves the aliases that are switched on: ``products`` (neuronxcc, nki, torch_neuronx when not
    really installed), ``forced`` (torch_neuronx whatever is installed), the old paths (always) and
    ``missing``: modules supplied only where the import system finds no file of that name
    (:func:`supply_missing`)."""

    def __init__(self, products: bool = False, forced: bool = False) -> None:
        self.products = products
        self.forced = forced
        self._real: dict[str, bool] = {}
        self.missing: dict[str, Optional[str]] = {}

    def really_installed(self, top: str) -> bool:
        if top not in self._real:
            self._real[top] = is_real_package(importlib.machinery.PathFinder.find_spec(top))
        return self._real[top]

    def target_of(self, name: str) -> tuple[bool, Optional[str]]:
        """(whether ``name`` is an alias here, the module it stands for or None for a facade)."""
        renamed = _renamed_target(name)
        if renamed is not None:
            return True, renamed
        top = name.partition(".")[0]
        if top not in _TOP_LEVEL:
            return False, None
        if top == "torch_neuronx" and self.forced:
            return True, _torch_neuronx_target(name)
        if not self.products or self.really_installed(top):
            return False, None
        if top == "torch_neuronx":
            return True, _torch_neuronx_target(name)
        if _product_target(name) is _MISSING:
            provided = ", ".join(_SIMULATOR + "." + a if top == _SIMULATOR else a for a in _PRODUCTS
                                 if a.partition(".")[0] == ("nki" if top == _SIMULATOR else top)
                                 and ".backends" not in a)
            raise ModuleNotFoundError(
                f"No module named '{name}': torchneuron_ext stands in for {top} with {provided} only "
                f"(the real package is not installed); see docs/nki.md for what the NKI simulator models",
                name=name)
        return True, _product_target(name)

    def find_spec(self, name: str, path: Optional[Sequence[str]], target: Any = None) -> Any:
        if name in self.missing:
            # This finder comes first on sys.meta_path, so it asks the path finder itself: a real file wins.
            if importlib.machinery.PathFinder.find_spec(name, path) is not None:
                return None
            module = self.missing[name]
            return importlib.machinery.ModuleSpec(name, _AliasLoader(module, package=module is None),
                                                  is_package=module is None)
        aliased, module = self.target_of(name)
        if not aliased:
            return None
        # Product aliases are packages so that any submodule is asked of this finder; an old path is
        # what its target is, so that `python -m <old path>` runs a module rather than looking for __main__.
        is_package = True
        if _renamed_target(name) is not None:
            moved = importlib.util.find_spec(module)
            if moved is None:
                return None  # no such module at the new path either: the usual ModuleNotFoundError
            is_package = moved.submodule_search_locations is not None
        return importlib.machinery.ModuleSpec(name, _AliasLoader(module), is_package=is_package)


_finder = AliasFinder()


def _ensure_on_meta_path() -> None:
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)


def install() -> None:
    """Make ``neuronxcc.nki*``, ``nki*``, ``nki_cpu_simulator.nki*``, ``neuron_dtypes`` and ``torch_neuronx*``
    importable when they are not installed."""
    _finder.products = True
    _ensure_on_meta_path()


def uninstall() -> None:
    """Undo :func:`install`: product names stop resolving, and aliased modules already imported are forgotten."""
    _finder.products = False
    for name in list(sys.modules):
        top = name.partition(".")[0]
        if top in _TOP_LEVEL and not _finder.really_installed(top) and not (top == "torch_neuronx" and _finder.forced):
            del sys.modules[name]


def supply_missing(modules: dict[str, Optional[str]]) -> None:
    """Make each name in ``modules`` resolve to the module named by its value (None: an empty package) when,
    and only when, no file of that name can be imported: a checkout's own files always win. What the NKI
    Library plugin uses for the harness files AWS's public tree lacks (compat/nki_library.py)."""
    _finder.missing.update(modules)
    _ensure_on_meta_path()


def withdraw_missing(names: Sequence[str]) -> None:
    """Undo :func:`supply_missing` for ``names`` (modules already imported stay imported)."""
    for name in names:
        _finder.missing.pop(name, None)


def installed() -> bool:
    """Whether the product aliases are installed."""
    return _finder.products and _finder in sys.meta_path


def install_from_environment() -> bool:
    """Install the product aliases if ``TORCHNEURON_EXT_NKI_COMPAT`` says so; whether it did.

    A value that is not understood is a warning, not an error: this runs inside ``import torch``.
    """
    if not _env.flag(ENV_VAR, on_error="warn"):
        return False
    install()
    return True


def force() -> None:
    """Make ``torch_neuronx`` this package even when another torch_neuronx is importable; forget any
    torch_neuronx modules imported before."""
    _finder.forced = True
    if _finder in sys.meta_path:
        sys.meta_path.remove(_finder)
    sys.meta_path.insert(0, _finder)
    for mod in [m for m in sys.modules if m == "torch_neuronx" or m.startswith("torch_neuronx.")]:
        if not getattr(sys.modules[mod], "__name__", "").startswith("torchneuron_ext"):
            del sys.modules[mod]


def unforce() -> None:
    """Undo :func:`force`."""
    _finder.forced = False


def rename(old: str) -> types.ModuleType:
    """Make the stub module ``old`` (a path listed in _RENAMED) the module that now lives elsewhere.

    Called by the stub at the old path while it is imported: what sys.modules holds when the stub returns
    is what the import gives, and the finder maps the old path's submodules.
    """
    _ensure_on_meta_path()
    module = importlib.import_module(_RENAMED[old])
    sys.modules[old] = module
    return module
