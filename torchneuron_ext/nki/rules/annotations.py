"""The legacy front end's check of annotated assignments (``err_annotation_shape_mismatch``).

AWS's error-code page: NKI checks the object's shape against a type annotation in the ``target: type =
value`` syntax, ``data: nt.tensor[128, 512] = nl.zeros((par_dim(128), 128), ...)`` is the error. Python
does not evaluate the annotations of local variables, so the source says which statements are annotated
(an ``nt.tensor[...]``/``nt.mutable_tensor[...]`` annotation on a plain name) and a line tracer on the
kernel's frame checks the name's value when the statement has run; the annotation is evaluated there, in
the kernel's scope, so ``nt.tensor[N, 512]`` works. Only tensors are judged, and only their shape (the page
says nothing of dtypes); a size-1 axis of the value matches any annotated size (sparse index grids), and
a value of another rank is not judged (free axes the simulator flattens).
Kernels without such statements are not traced. With a debugger or coverage
tracer installed the check stays off rather than replace it. ``nki.typing`` is the legacy dialect's (NKI
0.2 has none), so this is the legacy dialect's rule.
"""
from __future__ import annotations

import ast
import linecache
import sys
from types import CodeType, FrameType
from typing import Any, Callable, Optional

from ..errors import NKIError
from ..typing import _TensorType
from .source import kernel_ast

__all__ = ["begin", "end"]

_CACHE: "dict[CodeType, dict]" = {}


class _Annotated:
    """One annotated assignment: the name it binds, its annotation's code and the lines it spans."""
    __slots__ = ("name", "annotation", "text", "first", "last")

    def __init__(self, name: str, annotation: CodeType, text: str, first: int, last: int) -> None:
        self.name, self.annotation, self.text, self.first, self.last = name, annotation, text, first, last


def _statements(func: Callable) -> "dict[int, _Annotated]":
    """The kernel's annotated assignments of a tensor annotation, by first line."""
    code = func.__code__
    if code in _CACHE:
        return _CACHE[code]
    found: "dict[int, _Annotated]" = {}
    tree, first = kernel_ast(func)
    if tree is not None:
        for node in ast.walk(tree):
            if not (isinstance(node, ast.AnnAssign) and node.value is not None and isinstance(node.target, ast.Name)):
                continue
            if not isinstance(_resolve(node.annotation, func.__globals__), _TensorType):
                continue
            text = ast.unparse(node.annotation)
            found[node.lineno + first - 1] = _Annotated(
                node.target.id, compile(ast.Expression(node.annotation), code.co_filename, "eval"), text,
                node.lineno + first - 1, node.end_lineno + first - 1)
    _CACHE[code] = found
    return found


def _resolve(annotation: ast.expr, globals_: dict) -> Any:
    """What the subscripted name of ``nt.tensor[...]`` is, without evaluating the subscript."""
    node = annotation.value if isinstance(annotation, ast.Subscript) else None
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in globals_:
        return None
    value = globals_[node.id]
    for attr in reversed(parts):
        value = getattr(value, attr, None)
    return value


class _Tracer:
    """Line events of the kernel's frames: after an annotated statement ran, compare the shapes."""

    def __init__(self, code: CodeType, statements: "dict[int, _Annotated]") -> None:
        self.code, self.statements = code, statements
        self.pending: "dict[int, _Annotated]" = {}  # frame id -> the statement that just ran

    def global_trace(self, frame: FrameType, event: str, arg: Any) -> Optional[Callable]:
        return self.local_trace if frame.f_code is self.code else None

    def local_trace(self, frame: FrameType, event: str, arg: Any) -> Optional[Callable]:
        key = id(frame)
        pending = self.pending.get(key)
        if pending is not None and (event == "return" or not pending.first <= frame.f_lineno <= pending.last):
            del self.pending[key]
            _check(frame, pending)
        if event == "line" and frame.f_lineno in self.statements:
            self.pending[key] = self.statements[frame.f_lineno]
        if event == "return" and sys.gettrace() == self.global_trace:
            # The kernel returned (or raised): stop paying for tracing. Later instances of a grid run
            # untraced; their shapes are the first instance's.
            sys.settrace(None)
        return self.local_trace


def _check(frame: FrameType, stmt: _Annotated) -> None:
    value = frame.f_locals.get(stmt.name)
    if not (hasattr(value, "storage") and hasattr(value, "shape")):
        return
    try:
        expected = eval(stmt.annotation, frame.f_globals, frame.f_locals).shape
    except Exception:  # an annotation the kernel's scope cannot evaluate is not judged
        return
    if expected is None:
        return
    expected = tuple(expected) if isinstance(expected, (tuple, list)) else (expected,)
    shape = tuple(value.shape)
    expected = tuple(int(d) for d in expected)
    # A size-1 axis matches any size: the simulator's nl.mgrid indices are sparse (size 1 along the axes
    # they do not vary on), so `nisa.iota(3 * g.y + g.z)` is (1, 1, 3, 3) here where AWS's full index grid
    # gives the annotated (p, w, 3, 3) (AWS's select-and-scatter sample annotates exactly that).
    # Another rank is not judged either: the simulator's result may flatten free axes AWS's keeps apart
    # (its nisa.local_gather example annotates (128, 4, 16, 4) where the simulator gives (128, 64, 4)).
    if len(expected) == len(shape) and any(s != e and s != 1 for s, e in zip(shape, expected)):
        dims = ", ".join(str(d) for d in shape)
        text = linecache.getline(frame.f_code.co_filename, stmt.first) or None
        raise NKIError.at("err_annotation_shape_mismatch",
                          f"Tensor shape and the annotated shape mismatch: shape of `{stmt.name}[{dims}]` does "
                          f"not match the expected shape of [{', '.join(str(d) for d in expected)}] "
                          f"(annotated '{stmt.text}')",
                          (frame.f_code.co_filename, stmt.first, frame.f_code.co_name, text))


def begin(func: Callable, dialect: str) -> Optional[Callable]:
    """Before a legacy launch: trace the kernel when it has annotated assignments. The tracer it replaced
    (None), for ``end``; no tracing when another tracer is installed."""
    current = sys.gettrace()
    stale = isinstance(getattr(current, "__self__", None), _Tracer)  # a launch that failed before its kernel ran
    if dialect != "legacy" or (current is not None and not stale):
        return None
    statements = _statements(func)
    if not statements:
        return None
    tracer = _Tracer(func.__code__, statements)
    sys.settrace(tracer.global_trace)
    return tracer.global_trace


def end(installed: Optional[Callable]) -> None:
    if installed is not None and sys.gettrace() == installed:
        sys.settrace(None)
