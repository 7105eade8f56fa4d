"""The legacy (NKI 0.1, ``neuronxcc.nki``) front end's language rules, from AWS's error-code page.

Judged on the kernel's source where the rule is static, as the front end does before tracing, and on the
launch where it is about values:

- ``err_local_variable_used_out_of_scope``: a tensor created inside an ``if``/``else``/``for``/``while``
  block is used after the block, where no tensor of that name was created before it (the front end gives
  control blocks their own scope for tensors). An ``if`` whose condition reads no loop variable, tensor or
  value computed from them is decided while tracing and is not a block. Static: an assignment from a call of an ``nki.language`` or
  ``nki.isa`` function counts as creating a tensor.
- ``err_cannot_update_immutable_parameter``: a kernel that returns its outputs writes a parameter not
  annotated ``nt.mutable_tensor`` (kernels that return nothing are the older style whose outputs are
  parameters). Reported at the first write.
- ``err_tensor_output_not_written_to``: a kernel returns an HBM tensor it created and never wrote.
- ``err_control_flow_condition_depending_on_arange``: ``if``/``while``/``and``/``or`` on an ``nl.arange`` /
  ``nl.mgrid`` expression or a mask made from one (use ``mask=``).
- ``err_cannot_assign_to_index``: item assignment into an index expression (``nisa.iota`` makes a tile).

NKI 0.2 runs kernels as Python (fully unrolled loops, Python scopes): these rules are the legacy
dialect's only.
"""
from __future__ import annotations

import ast
import inspect
import linecache
import sys
import textwrap
import types
from typing import Any, Callable, Iterable, Optional

from ..errors import NKIError, NKITypeError, _is_internal
from ..typing import is_mutable
from . import annotations as _annotations
from . import dependencies as _deps
from .source import kernel_ast
from .source import parse as _parse_source
from . import masks as _masks

__all__ = ["begin", "end", "scope_violation", "index_truth_value", "index_item_assignment"]

_NKI_MODULES = ("torchneuron_ext.nki", "neuronxcc.nki", "nki.")
_SCOPE_CACHE: "dict[Any, Optional[tuple]]" = {}
_CONTROL = (ast.For, ast.AsyncFor, ast.While, ast.If)


# -- static: tensors used outside the block that created them ---------------------------------------------

def _is_nki_call(node: ast.AST, globals_: dict) -> bool:
    """``nl.load(...)``, ``nisa.iota(...)``, ``nl.ndarray(...)``: a call of a function of an NKI module that
    makes an on-chip tensor (HBM tensors in blocks are the kernel-level rule's, runtime.py)."""
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
        return False
    for kw in node.keywords:
        if kw.arg == "buffer" and "hbm" in ast.unparse(kw.value):
            return False
    base = node.func.value
    while isinstance(base, ast.Attribute):
        base = base.value
    if not isinstance(base, ast.Name):
        return False
    module = globals_.get(base.id)
    name = getattr(module, "__name__", "") if isinstance(module, types.ModuleType) else ""
    return name.startswith(_NKI_MODULES) or name == "nki"


def _assigned_tensors(stmts: Iterable[ast.stmt], globals_: dict) -> "dict[str, int]":
    """Names bound in these statements (and blocks inside them) to a new tensor, with their first line."""
    out: "dict[str, int]" = {}
    for stmt in stmts:
        for node in _walk_no_functions(stmt):
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None \
                    and _is_nki_call(node.value, globals_):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    if isinstance(t, ast.Name):
                        out.setdefault(t.id, node.lineno)
    return out


def _walk_no_functions(node: ast.AST) -> Iterable[ast.AST]:
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        for child in ast.iter_child_nodes(n):
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                stack.append(child)


def _bound_names(stmt: ast.stmt) -> "set[str]":
    """Names this statement binds at its own level (not inside blocks)."""
    names: "set[str]" = set()
    targets: list = []
    if isinstance(stmt, ast.Assign):
        targets = stmt.targets
    elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
        targets = [stmt.target]
    elif isinstance(stmt, (ast.For, ast.AsyncFor)):
        targets = [stmt.target]
    elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        names.add(stmt.name)
    elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
        names.update((a.asname or a.name).split(".")[0] for a in stmt.names)
    elif isinstance(stmt, ast.With):
        targets = [i.optional_vars for i in stmt.items if i.optional_vars is not None]
    for t in targets:
        for n in ast.walk(t):
            if isinstance(n, ast.Name):
                names.add(n.id)
    return names


def _first_load(stmt: ast.AST, names: "dict[str, int]") -> Optional[ast.Name]:
    loads = [n for n in _walk_no_functions(stmt)
             if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in names]
    return min(loads, key=lambda n: (n.lineno, n.col_offset)) if loads else None


def _headers(stmt: ast.stmt) -> list:
    if isinstance(stmt, (ast.If, ast.While)):
        return [stmt.test]
    if isinstance(stmt, (ast.For, ast.AsyncFor)):
        return [stmt.iter]
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        return [i.context_expr for i in stmt.items]
    return []


def _traced_names(fdef: ast.AST, globals_: dict) -> "set[str]":
    """Names whose values exist only when the kernel runs: loop variables, tensors, and whatever is computed
    from them (a fixed point over the kernel's assignments, ignoring order: names reused both ways are rare)."""
    names: "set[str]" = set()
    assigns = []
    for node in _walk_no_functions(fdef):
        if isinstance(node, (ast.For, ast.AsyncFor)):
            names |= {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            bound = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
            if _is_nki_call(node.value, globals_):
                names |= bound
            else:
                assigns.append((bound, {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)}))
    grew = True
    while grew:
        grew = False
        for bound, reads in assigns:
            if reads & names and not bound <= names:
                names |= bound
                grew = True
    return names


def _is_control_block(stmt: ast.stmt, traced: "set[str]") -> bool:
    """Loops are the kernel's; an ``if`` is only when its condition is known when the kernel runs. On a
    Python value (a parameter's shape, ``nisa.get_nc_version()``, a flag) the front end evaluates it while
    tracing and keeps the taken branch in the enclosing scope, as AWS's samples rely on (a tensor created
    in both branches of ``if dropout_p > 0.0:`` and used after them)."""
    if isinstance(stmt, ast.If):
        return any(isinstance(n, ast.Name) and n.id in traced for n in ast.walk(stmt.test))
    return isinstance(stmt, _CONTROL)


def _check_block(stmts: list, defined: "set[str]", local: "dict[str, int]", globals_: dict,
                 traced: "set[str]") -> Optional[tuple]:
    """(line of the use, name, line of its creation) of the first tensor used outside its block. ``local``:
    tensors created in blocks that ended, not visible here unless created again. ``traced``: the names an
    ``if`` must read to be a block (_is_control_block)."""
    local = dict(local)
    for stmt in stmts:
        compound = isinstance(stmt, _CONTROL + (ast.With, ast.AsyncWith, ast.Try))
        for node in (_headers(stmt) if compound else [stmt]):
            use = _first_load(node, local)
            if use is not None:
                return use.lineno, use.id, local[use.id]
        bound = _bound_names(stmt)
        for name in bound:
            local.pop(name, None)
        defined |= bound
        if not compound:
            continue
        control = _is_control_block(stmt, traced)
        blocks = [stmt.body, stmt.orelse] if isinstance(stmt, _CONTROL) else _sub_blocks(stmt)
        for body in blocks:
            # A control block has its own scope (a copy of what is defined); with/try and an ``if`` decided
            # while tracing share this one.
            found = _check_block(body, set(defined) if control else defined, local, globals_, traced)
            if found is not None:
                return found
        if control:
            for name, line in _assigned_tensors(stmt.body + stmt.orelse, globals_).items():
                if name not in defined:
                    local.setdefault(name, line)
    return None


def _sub_blocks(stmt: ast.stmt) -> "list[list]":
    if isinstance(stmt, ast.Try):
        return [stmt.body, *[h.body for h in stmt.handlers], stmt.orelse, stmt.finalbody]
    return [stmt.body]


def scope_violation(func: Callable) -> Optional[tuple]:
    """The first tensor of ``func`` used outside its block: (location, name, creation line) or None."""
    code = func.__code__
    if code in _SCOPE_CACHE:
        return _SCOPE_CACHE[code]
    found = None
    tree, first = kernel_ast(func)
    if tree is not None and tree.body and isinstance(tree.body[0], (ast.FunctionDef, ast.AsyncFunctionDef)):
        fdef = tree.body[0]
        offset = first - 1  # the source starts at the first decorator
        params = {a.arg for a in fdef.args.args + fdef.args.kwonlyargs + fdef.args.posonlyargs}
        params |= {a.arg for a in (fdef.args.vararg, fdef.args.kwarg) if a is not None}
        hit = _check_block(fdef.body, params, {}, func.__globals__, _traced_names(fdef, func.__globals__))
        if hit is not None:
            line, name, created = hit
            filename = code.co_filename
            text = linecache.getline(filename, line + offset) or None
            found = ((filename, line + offset, code.co_name, text), name, created + offset)
    _SCOPE_CACHE[code] = found
    return found


# -- the launch: immutable parameters, outputs never written ----------------------------------------------

class Session:
    """One legacy launch's watch on its parameters."""

    def __init__(self, func: Callable, params: "dict[Any, str]") -> None:
        self.func, self.params = func, params
        self.first_write: "dict[Any, tuple]" = {}
        self.tracer: Optional[Callable] = None  # annotations.py's check of annotated shapes, while it runs

    def on_write(self, storage: Any, location: Optional[tuple]) -> None:
        self.first_write.setdefault(storage, location)


def begin(func: Callable, dialect: str, arguments: "dict[str, Any]") -> Optional[Session]:
    """Before a launch runs the kernel: the static rules, and the watch on parameters."""
    _deps.unwatch()
    if dialect != "legacy":
        return None
    found = scope_violation(func)
    if found is not None:
        location, name, created = found
        raise NKIError.at("err_local_variable_used_out_of_scope",
                          f"Local variable '{name}' is referenced outside of its parent scope: it is created "
                          f"inside a control block (line {created}) and tensors are local to the block that "
                          f"creates them; create it before the block and assign with '{name}[...] ='", location)
    _masks.check(func)
    annotations = getattr(func, "__annotations__", {})
    params = {}
    for name, value in arguments.items():
        storage = getattr(value, "storage", None)
        if storage is not None and not is_mutable(annotations.get(name)):
            params[storage] = name
    session = Session(func, params)
    session.tracer = _annotations.begin(func, dialect)
    if params:
        _deps.watch(params, session.on_write)
    return session


def end(session: Optional[Session], result: Any) -> None:
    """After the kernel ran: judge what it wrote against what it returns."""
    _deps.unwatch()
    if session is None:
        return
    _annotations.end(session.tracer)
    returned = list(_tensors(result))
    if returned:
        for storage, name in session.params.items():
            if storage in session.first_write:
                raise NKIError.at("err_cannot_update_immutable_parameter",
                                  f"Cannot update immutable parameter '{name}': parameters of a kernel are "
                                  f"immutable unless annotated nt.mutable_tensor (or return a copy made with "
                                  f"nisa.dma_copy into a new nl.shared_hbm tensor)", session.first_write[storage])
    for position, tensor in enumerate(returned):
        storage = tensor.storage
        if storage.buffer.is_hbm and storage not in session.params and not storage.written:
            raise NKIError.at("err_tensor_output_not_written_to",
                              f"output #{position} of the kernel ({_describe(tensor)}) is returned but never "
                              f"written: check the range of the loop that stores it (a range of 0 iterations "
                              f"never runs), or store a default value first", _return_location(session.func))


def _tensors(result: Any) -> Iterable[Any]:
    stack = [result]
    while stack:
        v = stack.pop(0)
        if hasattr(v, "storage") and hasattr(v, "shape"):
            yield v
        elif isinstance(v, (tuple, list)):
            stack[:0] = list(v)
        elif isinstance(v, dict):
            stack[:0] = list(v.values())


def _describe(tensor: Any) -> str:
    name = f"'{tensor.name}' " if tensor.name else ""
    return f"{name}{tensor.buffer.name} tensor of shape {tuple(tensor.shape)}"


def _return_location(func: Callable) -> Optional[tuple]:
    """The kernel's last ``return`` statement (else its ``def``)."""
    code = func.__code__
    try:
        lines, first = inspect.getsourcelines(func)
        tree = _parse_source(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError, IndentationError):
        return None
    returns = [n for n in _walk_no_functions(tree.body[0]) if isinstance(n, ast.Return)] if tree.body else []
    line = (max(n.lineno for n in returns) if returns else 1) + first - 1
    return code.co_filename, line, code.co_name, linecache.getline(code.co_filename, line) or None


# -- Python operations on index expressions, and APIs outside kernels -----------------------------------

def index_truth_value() -> None:
    """``IndexExpr.__bool__``: control flow cannot depend on an index expression or a mask."""
    raise NKITypeError("err_control_flow_condition_depending_on_arange",
                       "Control-flow depending on `nl.arange` or `nl.mgrid` is not supported: an NKI index "
                       "expression or mask has no single truth value; combine masks with '&' and '|', not "
                       "'and'/'or', and pass them as mask=", frame=sys._getframe(2))


def index_item_assignment() -> None:
    """``IndexExpr.__setitem__`` from a kernel (the simulator's own code may fill index arrays)."""
    caller = sys._getframe(2)
    if not _is_internal(caller.f_code.co_filename):
        raise NKITypeError("err_cannot_assign_to_index",
                           "An `index` or `mask` tensor does not support item assignment: make a tile of it "
                           "first with nisa.iota(...) and assign into that", frame=caller)

