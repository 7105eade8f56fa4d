"""The package's import graph against its layering: import circles, upward imports, and the NKI core's purity.

    python tools/import_graph.py            # summary; exit 1 if there is a circle or an upward import
    python tools/import_graph.py --edges    # every module-to-module import, layer numbers beside

Every import statement counts, at module level or inside a function, since a deferred import still makes
the lower module know the upper one. The extension module `_C` is below every layer and is not a node.
LAYERS is the architecture (docs/architecture.md, "Layers"): a module may import its own layer and the
layers below; a higher layer reaches a lower one only by being imported by it or by registering into it.
"""
from __future__ import annotations

import ast
import os
import sys
from collections import defaultdict

PACKAGE = "torchneuron_ext"

# Longest prefix wins; a key ending in "$" names that one module only. Lower numbers are lower layers.
LAYERS = {
    # 0: leaves every layer may use: stdlib-only helpers, the internals inventory, the Python half of
    # csrc/instrumentation, the Trainium target records and projection formulas.
    "torchneuron_ext._env": 0,
    "torchneuron_ext._torch_internals": 0,
    "torchneuron_ext.instrumentation": 0,
    "torchneuron_ext.trainium": 0,
    # 1: the NKI simulator's core (numpy only).
    "torchneuron_ext.nki": 1,
    # The nki package's face: it assembles the core and, when torch is there, the torch integration.
    "torchneuron_ext.nki$": 3,
    # 2: the torch.neuron device module.
    "torchneuron_ext.neuron": 2,
    # 3: features on the device: compile, custom ops, distributed, profiling, NKI's torch integration.
    "torchneuron_ext.compiler": 3,
    "torchneuron_ext.custom_op": 3,
    "torchneuron_ext.distributed": 3,
    "torchneuron_ext.profiler": 3,
    "torchneuron_ext.nki.torch": 3,
    # The integration's former paths (nki/torch_ops.py, aten_routing.py, interop.py): each is its module in
    # nki/torch under the old name, so it sits in that layer although its file is in the core's folder.
    "torchneuron_ext.nki.torch_ops": 3,
    "torchneuron_ext.nki.aten_routing": 3,
    "torchneuron_ext.nki.interop": 3,
    "torchneuron_ext.costmodel": 3,
    # 4: what imitates other products, and the entry points.
    "torchneuron_ext.compat": 4,
    # The former path of compat/aliases.py (`python -m torchneuron_ext.nki.compat`, docs/nki.md): a stub that
    # re-exports compat's names, so it sits in compat's layer although its file is in nki/.
    "torchneuron_ext.nki.compat": 4,
    "torchneuron_ext.cli": 4,
    "torchneuron_ext": 4,
}

# The NKI core must not import these (at any level): it is tested with numpy alone.
NKI_CORE = "torchneuron_ext.nki"
NKI_CORE_EXCLUDED = ("torchneuron_ext.nki.torch",)
FORBIDDEN_IN_CORE = ("torch",)


def layer_of(module: str) -> int:
    if module + "$" in LAYERS:
        return LAYERS[module + "$"]
    best = max((p for p in LAYERS if not p.endswith("$") and (module == p or module.startswith(p + "."))), key=len)
    return LAYERS[best]


def modules(root: str) -> dict[str, str]:
    found = {}
    for dirpath, _, files in os.walk(os.path.join(root, PACKAGE)):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(dirpath, f)
                name = os.path.relpath(path, root)[:-3].replace(os.sep, ".")
                found[name[: -len(".__init__")] if name.endswith(".__init__") else name] = path
    return found


def _targets(module: str, node: ast.AST, is_package: bool, known: dict) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = module if is_package else module.rpartition(".")[0]
    if node.level:
        parts = base.split(".")
        base = ".".join(parts[: len(parts) - (node.level - 1)])
        full = base + ("." + node.module if node.module else "")
    else:
        full = node.module or ""
    out = []
    for alias in node.names:
        candidate = f"{full}.{alias.name}"
        out.append(candidate if candidate in known or candidate.endswith("._C") else full)
    return out


def graph(root: str) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(package edges, external top-level names imported) per module."""
    known = modules(root)
    edges: dict[str, set[str]] = defaultdict(set)
    external: dict[str, set[str]] = defaultdict(set)
    for module, path in known.items():
        with open(path) as f:
            tree = ast.parse(f.read(), path)
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for target in _targets(module, node, path.endswith("__init__.py"), known):
                if not target.startswith(PACKAGE):
                    external[module].add(target.partition(".")[0])
                    continue
                if target.endswith("._C"):
                    continue
                while target not in known and "." in target:
                    target = target.rpartition(".")[0]
                if target in known and target != module:
                    edges[module].add(target)
    return edges, external


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def upward(edges: dict[str, set[str]]) -> list[tuple[str, str]]:
    return sorted((m, t) for m, ts in edges.items() for t in ts if layer_of(t) > layer_of(m))


def impure_core(external: dict[str, set[str]]) -> list[tuple[str, str]]:
    return sorted((m, name) for m, names in external.items() for name in names
                  if m.startswith(NKI_CORE + ".")
                  and not any(m == x or m.startswith(x + ".") for x in NKI_CORE_EXCLUDED)
                  and name in FORBIDDEN_IN_CORE)


def main(argv: list[str]) -> int:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    edges, external = graph(root)
    if "--edges" in argv:
        for m in sorted(edges):
            for t in sorted(edges[m]):
                print(f"{m} [{layer_of(m)}] -> {t} [{layer_of(t)}]")
    found_circles, found_up, found_impure = circles(edges), upward(edges), impure_core(external)
    print(f"{len(modules(root))} modules, {sum(len(t) for t in edges.values())} imports between them")
    print(f"import circles: {len(found_circles)}")
    for c in found_circles:
        print("  " + " <-> ".join(c))
    print(f"upward imports: {len(found_up)}")
    for m, t in found_up:
        print(f"  {m} [{layer_of(m)}] -> {t} [{layer_of(t)}]")
    print(f"NKI core modules importing torch: {len(found_impure)}")
    for m, name in found_impure:
        print(f"  {m} imports {name}")
    return 1 if found_circles or found_up or found_impure else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
