"""A kernel's source as the front end reads it: the rules that judge code before it runs parse it here."""
from __future__ import annotations

import ast
import inspect
import textwrap
from typing import Any, Optional

__all__ = ["kernel_ast"]


def kernel_ast(obj: Any) -> "tuple[Optional[ast.Module], int]":
    """The parsed (dedented) source of a function or code object and the file line its first line is on;
    ``(None, 0)`` where Python has no source for it (a REPL, ``exec``), so a static rule stays silent."""
    try:
        lines, first = inspect.getsourcelines(obj)
        return ast.parse(textwrap.dedent("".join(lines))), first
    except (OSError, TypeError, SyntaxError, IndentationError):
        return None, 0
