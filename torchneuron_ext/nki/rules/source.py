"""A kernel's source as the front end reads it: the rules that judge code before it runs parse it here."""
from __future__ import annotations

import ast
import inspect
import textwrap
import threading
from typing import Any, Optional

__all__ = ["kernel_ast", "parse"]

_PARSE_LOCK = threading.Lock()


def parse(source: str) -> ast.Module:
    """``ast.parse``, one thread at a time. CPython 3.11 keeps the AST constructor's recursion depth in state
    shared by the interpreter's threads, so the two cores of an LNC=2 launch parsing a kernel at once can
    fail with "SystemError: AST constructor recursion depth mismatch" (seen in the NKI Library's top-k)."""
    with _PARSE_LOCK:
        return ast.parse(source)


def kernel_ast(obj: Any) -> "tuple[Optional[ast.Module], int]":
    """The parsed (dedented) source of a function or code object and the file line its first line is on;
    ``(None, 0)`` where Python has no source for it (a REPL, ``exec``), so a static rule stays silent."""
    try:
        lines, first = inspect.getsourcelines(obj)
        return parse(textwrap.dedent("".join(lines))), first
    except (OSError, TypeError, SyntaxError, IndentationError):
        return None, 0
