"""The mechanism of the inventory of PyTorch internals: entries, their checks, and the one error message.

A torch upgrade can rename a private module, change a private signature or drop an attribute that
one of this package's install sites uses. Without an inventory that shows up far from its cause (an
Inductor traceback in a compiled graph, a silently wrong stream, a KeyError at the first
serialization). So each install site declares its entries next to the code they guard (`register`),
calls `require(key)` before it patches or relies on anything, and a break fails there, once, as a
`TorchInternalError` that names the internal, what it relied on and what to update.

This module is a leaf: it imports nothing from the package, so every layer can register into it.
`check_all()` imports the fixed list `SITES` of declaring modules first, so the inventory is complete
without the sites having run; none of them imports Dynamo or Inductor at import time.
`python -m torchneuron_ext._torch_internals --markdown` prints docs/architecture.md's table
(tests/test_torch_internals.py checks that the doc holds its output).

Checks are cheap on purpose (attribute and signature existence, a word in torch's source read as
text, never an import of Dynamo or Inductor), because several run during `import torch`.

Entries whose key starts with "C" live in C++ (or patch C++ headers). Their installs are checked
where they are compiled or registered; their Python check tests what is observable from Python (the
dispatcher's table, a header's text, the generator's draws), so the canary test covers them too.
"""
from __future__ import annotations

import dataclasses
import importlib
import inspect
import os
import re
import sys
from typing import Any, Callable, Optional

VERIFIED_ON = "2.13.0"

# The modules that declare entries. Entries are listed by key whatever the order; a require() of an
# entry its caller does not declare (P17, declared in nki/torch/tracing.py and also required by launch.py
# and aten_routing.py) imports them in this order until it is found.
SITES: tuple[str, ...] = (
    "torchneuron_ext",
    "torchneuron_ext.neuron",
    "torchneuron_ext.neuron.device",
    "torchneuron_ext.neuron._csrc_internals",
    "torchneuron_ext.compiler._hooks",
    "torchneuron_ext.compiler.registration",
    "torchneuron_ext.compiler.cpu_parity",
    "torchneuron_ext.compiler.backend",
    "torchneuron_ext.custom_op.headers",
    "torchneuron_ext.custom_op.library",
    "torchneuron_ext.distributed.backend",
    "torchneuron_ext.profiler.config",
    "torchneuron_ext.profiler.memory_timeline",
    "torchneuron_ext.nki.torch.tracing",
    "torchneuron_ext.nki.torch.launch",
    "torchneuron_ext.nki.torch.ops",
    "torchneuron_ext.nki.torch.aten_routing",
)


class TorchInternalError(RuntimeError):
    """A PyTorch internal this package relies on is missing or has changed in the running torch."""


class Broken(Exception):
    """Raised by a check: what in the running torch differs from what the entry relies on."""


@dataclasses.dataclass(frozen=True)
class Internal:
    key: str
    name: str
    where: str  # the install site(s) in this package
    relies_on: str
    update: str  # what to change when it breaks
    check: Callable[[], None]  # raises Broken (or AttributeError/ImportError/...) when broken


_BY_KEY: dict[str, Internal] = {}
_verified: set[str] = set()


def register(key: str, name: str, where: str, relies_on: str, update: str,
             check: Callable[[], None]) -> Internal:
    """Declare an entry (idempotent for the same declaration: a site module may be imported twice)."""
    if not re.fullmatch(r"[PC]\d+", key):
        raise ValueError(f"internal keys are P<n> (Python) or C<n> (C++), got {key!r}")
    entry = Internal(key, name, where, relies_on, update, check)
    known = _BY_KEY.get(key)
    if known is not None and (known.name, known.where) != (name, where):
        raise ValueError(f"internal {key} is declared twice: {known.name} ({known.where}) and {name} ({where})")
    _BY_KEY[key] = entry
    return entry


def _load_sites(until: Optional[str] = None) -> None:
    for module in SITES:
        importlib.import_module(module)
        if until in _BY_KEY:
            return


def _order(key: str) -> tuple[int, int]:
    return ("PC".index(key[0]), int(key[1:]))


def entries() -> tuple[Internal, ...]:
    """Every entry, Python ones (P) then C++ ones (C), by number."""
    _load_sites()
    return tuple(_BY_KEY[k] for k in sorted(_BY_KEY, key=_order))


def internal(key: str) -> Internal:
    if key not in _BY_KEY:
        _load_sites(until=key)  # a site that requires an entry another module declares
    return _BY_KEY[key]


def __getattr__(name: str) -> Any:
    if name == "INTERNALS":  # the inventory as a tuple, as before the entries moved to their sites
        return entries()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# -- check helpers ----------------------------------------------------------------------------------

def _torch() -> Any:
    return sys.modules.get("torch") or importlib.import_module("torch")


def attribute(module: str, *names: str) -> Any:
    """`module.name` for each dotted name (the last one returned); raises naming the missing one."""
    mod = importlib.import_module(module)
    found: Any = None
    for dotted in names:
        obj: Any = mod
        for part in dotted.split("."):
            if not hasattr(obj, part):
                raise Broken(f"{module}.{dotted} does not exist")
            obj = getattr(obj, part)
        found = obj
    return found


def has_attributes(module: str, *names: str) -> Callable[[], None]:
    """A check that only asks `attribute(module, *names)`: most entries rely on nothing more than that."""
    def check() -> None:
        attribute(module, *names)
    return check


def parameters(fn: Any, *names: str, label: str) -> None:
    """`fn` accepts each of `names` (by name)."""
    params = inspect.signature(fn).parameters
    missing = [n for n in names if n not in params]
    if missing:
        raise Broken(f"{label} has no parameter {', '.join(missing)} (signature {inspect.signature(fn)})")


def source_mentions(relpath: str, *texts: str) -> None:
    """torch's own source file `relpath` contains each of `texts` (read as text, not imported)."""
    path = os.path.join(os.path.dirname(_torch().__file__), relpath)
    try:
        with open(path, encoding="utf-8") as f:
            source = f.read()
    except OSError as e:
        raise Broken(f"torch/{relpath} is missing ({e.strerror})") from None
    missing = [t for t in texts if t not in source]
    if missing:
        raise Broken(f"torch/{relpath} no longer mentions {', '.join(map(repr, missing))}")


def dispatch_entry(op: str, key: str, what: str, source: str) -> None:
    """The dispatch table of `op` serves `key` with a `what` entry that `source` (C++) registered.
    The caller loads the library that registers it."""
    lines = [line for line in _torch()._C._dispatch_dump_table(op).splitlines() if line.startswith(f"{key}:")]
    if not any(source in line and what in line for line in lines):
        raise Broken(f"{op} has no {what} entry from {source} at {key} (dispatcher: {lines or 'no entry'})")


# -- failing ------------------------------------------------------------------------------------------

def message(entry: Internal, detail: str) -> str:
    """The one wording of a broken internal: which, what it relied on, what to update."""
    return (f"torchneuron_ext relies on a PyTorch internal that torch {_torch().__version__} does not provide "
            f"(verified on {VERIFIED_ON}): {entry.key} {entry.name}, used by {entry.where}. It relies on "
            f"{entry.relies_on}. What failed: {detail}. Update: {entry.update}. "
            f"See torchneuron_ext/_torch_internals.py.")


def failure(key: str) -> Optional[str]:
    """The message for `key` if its check fails in this torch, else None."""
    entry = internal(key)
    try:
        entry.check()
    except (Broken, AttributeError, ImportError, TypeError, ValueError, KeyError, OSError) as e:
        detail = str(e) if isinstance(e, Broken) else f"{type(e).__name__}: {e}"
        return message(entry, detail)
    return None


def require(key: str) -> None:
    """Check `key` once per process; raise TorchInternalError if this torch breaks it."""
    if key in _verified:
        return
    text = failure(key)
    if text is not None:
        raise TorchInternalError(text)
    _verified.add(key)


def check_all() -> dict[str, Optional[str]]:
    """Every entry's failure message (None when it holds), by key."""
    return {entry.key: failure(entry.key) for entry in entries()}


# -- the documentation --------------------------------------------------------------------------------

def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown() -> str:
    """docs/architecture.md's table of the inventory."""
    rows = ["| # | Internal | Where | Relies on | Update when it breaks |", "|---|---|---|---|---|"]
    rows += [f"| {e.key} | {_cell(e.name)} | {_cell(e.where)} | {_cell(e.relies_on)} | {_cell(e.update)} |"
             for e in entries()]
    return "\n".join(rows) + "\n"


__all__ = ["Broken", "Internal", "SITES", "TorchInternalError", "attribute", "check_all", "dispatch_entry",
           "entries", "failure", "has_attributes", "internal", "markdown", "message", "parameters", "register",
           "require", "source_mentions"]


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(prog="python -m torchneuron_ext._torch_internals",
                                     description="The inventory of PyTorch internals torchneuron_ext relies on.")
    parser.add_argument("--markdown", action="store_true", help="print docs/architecture.md's table")
    args = parser.parse_args()
    # Run as __main__ this file is a second copy; the sites register into the package's module.
    from torchneuron_ext import _torch_internals as _registry

    if args.markdown:
        sys.stdout.write(_registry.markdown())
    else:
        broken = {k: v for k, v in _registry.check_all().items() if v}
        for key, text in broken.items():
            print(text)
        print(f"{len(_registry.entries())} internals, {len(broken)} broken in torch {_torch().__version__}")
        sys.exit(1 if broken else 0)
