"""The third-party packages AWS's NKI Library harness imports that this environment lacks.

AWS's harness (``test/conftest.py`` and ``test/utils``) and its tests import packages that neither
torchneuron_ext nor the Neuron SDK brings: at the 2026-04-13 release ``pytest_html``, ``boto3``,
``aws_embedded_metrics``, ``fabric2``, ``allpairspy`` and ``plotext`` (and ``botocore`` and ``paramiko``, which
come with two of them) from the conftest, ``scipy`` from one test file. The library's ``pyproject.toml`` lists
most of them as its ``test`` extra, which cannot be installed here as a whole (the package itself requires
``neuronx-cc`` and ``nki``, AWS's compiler packages). Without them pytest stops at the conftest with a
ModuleNotFoundError for the first one and writes no report; one missing at a time is a slow way to learn the
list. So before the run, the runner follows the imports that run when the conftest files and the selected tests
are imported, and names every package this interpreter cannot find, with where it is imported and one ``pip
install`` line for all of them.

Only imports that run at import time count (module level, class bodies, ``if``, ``with``, loop and ``try``
blocks): not those inside functions, under ``if TYPE_CHECKING:``, or in a ``try`` whose handler catches the
ImportError (the harness's optional imports). Imports of the checkout's own modules (``test.*``,
``nkilib_src.*``) are followed into their files; the standard library and the names the plugin supplies
(``nki``, ``nki_cpu_simulator``, ``neuron_dtypes``, ``neuronxcc``, ``torch_neuronx``) are never reported.
"""
from __future__ import annotations

import ast
import dataclasses
import importlib.util
import os
import re
import sys
from typing import Iterator, Optional, Sequence

from .aliases import _TOP_LEVEL as SUPPLIED

__all__ = ["MissingPackage", "PLUGIN_HOOKS", "missing_packages", "pip_names", "format_missing_packages", "from_module",
           "import_time_imports", "plugin_hooks", "package_of", "python_files"]

# Hooks a conftest may implement that a pytest plugin declares, not pytest itself: pytest refuses a conftest that
# implements a hook nobody declares ("unknown hook"), so the plugin is needed although nothing imports it (AWS's
# conftest implements xdist's pytest_configure_node). Import name -> (requirement, hook names; a name ending in
# "_" is a prefix).
PLUGIN_HOOKS = {
    "xdist": ("pytest-xdist", ("pytest_configure_node", "pytest_testnodeready", "pytest_testnodedown",
                               "pytest_handlecrashitem", "pytest_xdist_")),
    "pytest_html": ("pytest-html", ("pytest_html_",)),
    "pytest_metadata": ("pytest-metadata", ("pytest_metadata",)),
}

# Handlers that make a try block's imports optional.
_OPTIONAL_IMPORT_HANDLERS = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}


@dataclasses.dataclass(frozen=True)
class MissingPackage:
    """A top-level module imported at import time that this interpreter cannot find."""

    module: str            # the top-level import name, e.g. "pytest_html"
    file: str              # the first importing file found, relative to the checkout
    line: int
    in_conftest: bool      # imported (directly or through the checkout's modules) by a conftest.py
    hook: str = ""         # for a plugin nothing imports: the conftest's hook that needs it (PLUGIN_HOOKS)
    requirement: str = ""  # the package to install, where known (PLUGIN_HOOKS)


def _is_optional(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(n, ast.Name) and n.id in _OPTIONAL_IMPORT_HANDLERS or
               isinstance(n, ast.Attribute) and n.attr in _OPTIONAL_IMPORT_HANDLERS for n in names)


def _is_type_checking(test: ast.expr) -> bool:
    return isinstance(test, ast.Name) and test.id == "TYPE_CHECKING" or \
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _import_time_statements(body: Sequence[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements of ``body`` that run when the module is imported, nested blocks included."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        yield node
        if isinstance(node, ast.ClassDef):
            yield from _import_time_statements(node.body)
        elif isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                yield from _import_time_statements(node.body)
            yield from _import_time_statements(node.orelse)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            yield from _import_time_statements(node.body)
        elif isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
            if not any(_is_optional(h) for h in node.handlers):
                yield from _import_time_statements(node.body)
            for h in node.handlers:
                yield from _import_time_statements(h.body)
            yield from _import_time_statements(node.orelse)
            yield from _import_time_statements(node.finalbody)
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
            yield from _import_time_statements(node.body)
            yield from _import_time_statements(node.orelse)


def _is_optional_hook(node: ast.FunctionDef) -> bool:
    # @pytest.hookimpl(optionalhook=True): pytest accepts the hook although nothing declares it.
    return any(isinstance(d, ast.Call) and any(k.arg == "optionalhook" and isinstance(k.value, ast.Constant) and
                                               k.value.value for k in d.keywords) for d in node.decorator_list)


def plugin_hooks(tree: ast.Module) -> list:
    """(line, hook, plugin's import name) of each module-level hook function of a conftest that a plugin of
    PLUGIN_HOOKS declares and is not marked optional."""
    found = []
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or _is_optional_hook(node):
            continue
        for plugin, (_, hooks) in PLUGIN_HOOKS.items():
            if any(node.name == h or h.endswith("_") and node.name.startswith(h) for h in hooks):
                found.append((node.lineno, node.name, plugin))
    return found


def from_module(node: ast.ImportFrom, package: Sequence[str]) -> Optional[str]:
    """The absolute dotted module of ``from ... import``, its dots resolved against ``package`` (the importing
    file's package); None where they climb above the top or name nothing."""
    if not node.level:
        return node.module
    if node.level - 1 > len(package):
        return None
    base = list(package[:len(package) - (node.level - 1)])
    return ".".join(base + ([node.module] if node.module else [])) or None


def import_time_imports(tree: ast.Module, package: Sequence[str]) -> list:
    """(line, module, names imported from it) of each import-time import; relative ones resolved against
    ``package`` (package_of's)."""
    found = []
    for node in _import_time_statements(tree.body):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, ()) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and (module := from_module(node, package)):
            found.append((node.lineno, module, tuple(a.name for a in node.names if a.name != "*")))
    return found


def package_of(checkout: str, path: str) -> list:
    """The dotted package of a file of the checkout, relative to the path entry that holds it: ``src`` for the
    library's kernels, else the checkout (``test.utils``)."""
    root = os.path.abspath(checkout)
    for base in (os.path.join(root, "src"), root):
        rel = os.path.relpath(path, base)
        if not rel.startswith(".."):
            return rel.split(os.sep)[:-1]
    return []


def python_files(checkout: str, paths: Sequence[str]) -> list:
    """The Python files under ``paths`` (relative to the checkout; a node id, file.py::Class::test[...], selects
    its file), sorted, absolute."""
    files: set = set()
    for p in paths:
        target = os.path.join(checkout, p.split("::", 1)[0])
        if os.path.isfile(target) and target.endswith(".py"):
            files.add(os.path.abspath(target))
        for dirpath, _, names in os.walk(target):
            files.update(os.path.abspath(os.path.join(dirpath, n)) for n in names if n.endswith(".py"))
    return sorted(files)


class _Checkout:
    """Resolves module names to the checkout's files: its root and its ``src`` are on the run's path."""

    def __init__(self, checkout: str) -> None:
        self.root = os.path.abspath(checkout)
        self.roots = [self.root, os.path.join(self.root, "src")]

    def is_local(self, top: str) -> bool:
        return any(os.path.isdir(os.path.join(r, top)) or os.path.isfile(os.path.join(r, top + ".py"))
                   for r in self.roots)

    def module_file(self, module: str) -> Optional[str]:
        """The file of ``module`` itself (a package's __init__.py), if the checkout has one."""
        parts = module.split(".")
        for root in self.roots:
            base = os.path.join(root, *parts)
            for candidate in (os.path.join(base, "__init__.py"), base + ".py"):
                if os.path.isfile(candidate):
                    return candidate
        return None

    def files(self, module: str, names: Sequence[str] = ()) -> list:
        """The files ``from module import names`` (or ``import module``) executes: each package's
        __init__.py, the module's own, and those of the names that are submodules."""
        parts = module.split(".")
        chain = [self.module_file(".".join(parts[:i])) for i in range(1, len(parts) + 1)]
        chain += [self.module_file(f"{module}.{name}") for name in names]
        return [f for f in chain if f is not None]


def _conftest_chain(checkout: str, select: Sequence[str]) -> list:
    """The conftest.py files pytest loads for the selection: those of the directories from the checkout down to
    each selected path, and every one under the selected directories."""
    root = os.path.abspath(checkout)
    found = set()
    for path in select:
        target = os.path.abspath(os.path.join(root, path.split("::", 1)[0]))
        d = target if os.path.isdir(target) else os.path.dirname(target)
        while True:
            candidate = os.path.join(d, "conftest.py")
            if os.path.isfile(candidate):
                found.add(candidate)
            if d == root or os.path.dirname(d) == d or not d.startswith(root):
                break
            d = os.path.dirname(d)
        if os.path.isdir(target):
            for dirpath, _, names in os.walk(target):
                if "conftest.py" in names:
                    found.add(os.path.join(dirpath, "conftest.py"))
    return sorted(found)


def _findable(top: str) -> bool:
    try:
        return importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        return False


def missing_packages(checkout: str, select: Sequence[str], parsed: Optional[dict] = None) -> list:
    """The top-level modules that importing the conftest files and the selected tests (``select``: paths or
    node ids relative to the checkout) would import and this interpreter cannot find, each with the first
    importing file found, in the order the imports run: those a conftest needs first. ``parsed``: absolute path
    -> import_time_imports of the files the caller has parsed already (the runner's scan_sources), so that no
    file is parsed twice."""
    tree_of = _Checkout(checkout)
    missing: dict = {}
    seen: set = set()

    def walk(path: str, in_conftest: bool) -> None:
        # Depth first at each import, as Python executes them: the first package reported for a file is the
        # one its import would fail on first.
        seen.add(path)
        conftest = os.path.basename(path) == "conftest.py"  # parsed here also for its hooks
        if parsed is not None and path in parsed and not conftest:
            imports, hooks = parsed[path], []
        else:
            try:
                with open(path, "rb") as f:
                    tree = ast.parse(f.read(), path)
            except (OSError, SyntaxError, ValueError):  # the runner's source_problems names these
                return
            imports = import_time_imports(tree, package_of(checkout, path))
            hooks = plugin_hooks(tree) if conftest else []
        for line, module, names in imports:
            top = module.split(".")[0]
            if tree_of.is_local(top):
                for f in tree_of.files(module, names):
                    if f not in seen:
                        walk(f, in_conftest)
            elif not (top in sys.stdlib_module_names or top in SUPPLIED or top == "torchneuron_ext" or
                      top in missing or _findable(top)):
                missing[top] = MissingPackage(top, os.path.relpath(path, tree_of.root), line, in_conftest)
        for line, hook, plugin in hooks:
            if plugin not in missing and not _findable(plugin):
                missing[plugin] = MissingPackage(plugin, os.path.relpath(path, tree_of.root), line, in_conftest, hook,
                                                 PLUGIN_HOOKS[plugin][0])

    for path in _conftest_chain(checkout, select):
        if path not in seen:
            walk(path, True)
    for path in python_files(checkout, select):
        if path not in seen and os.path.basename(path) != "conftest.py":
            walk(path, False)
    return list(missing.values())


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def pip_names(checkout: str) -> dict:
    """Import name (canonical form) -> the requirement name the checkout's pyproject.toml gives it (its
    dependencies and every extra); empty where there is no pyproject.toml or no TOML reader (Python 3.10)."""
    try:
        import tomllib
        with open(os.path.join(checkout, "pyproject.toml"), "rb") as f:
            project = tomllib.load(f).get("project", {})
    except (ImportError, OSError, ValueError):
        return {}
    requirements = list(project.get("dependencies", []))
    for extra in project.get("optional-dependencies", {}).values():
        requirements += extra
    names = {}
    for requirement in requirements:
        m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", str(requirement))
        if m:
            names.setdefault(_canonical(m.group(1)), m.group(1))
    return names


def format_missing_packages(missing: Sequence[MissingPackage], names: Optional[dict] = None) -> str:
    """The report's lines on ``missing`` (empty when nothing is), with one pip command for all of them: the
    requirement names of ``names`` (pip_names), else the import names."""
    if not missing:
        return ""
    names = names or {}
    lines = [f"AWS's NKI Library tests need {len(missing)} package(s) this environment lacks:"]
    width = max(len(m.module) for m in missing)
    for m in missing:
        where = f"a conftest implements its hook {m.hook}: pytest refuses the conftest without it" if m.hook else \
            "a conftest: no test can be collected without it" if m.in_conftest else \
            "tests importing it are collection errors"
        lines.append(f"  {m.module:{width}}  {m.file}:{m.line} ({where})")
    unlisted = [m.module for m in missing if not m.requirement and _canonical(m.module) not in names]
    lines.append("install them: pip install " + " ".join(m.requirement or names.get(_canonical(m.module), m.module)
                                                         for m in missing)
                 + (f"  ({', '.join(unlisted)}: the import name; AWS's pyproject.toml lists no package of that name)"
                    if unlisted else ""))
    return "\n".join(lines) + "\n"
