"""The legacy front end's rules on the truth value of tensors, from AWS's error-code page.

- ``err_ambiguous_tensor_truth_value``: the truth value of a tensor of more than one element (``not
  (t > 0)``, ``if b:`` for an optional tensor parameter): use ``~``/``&``/``|`` and ``is None``.
- ``err_dynamic_control_flow_not_supported``: ``if tile:`` (and ``not``, ``and``/``or``, a conditional
  expression) on a tile: the compiler cannot branch on a value the device computes.
- ``err_while_loop_requires_unconditional_entry``: a ``while`` loop whose condition is a tile's value when
  the loop is entered. The compiler supports only the do-while pattern: the first iteration runs
  unconditionally (``cond = True; while cond: ...; cond = t < 10``) and the tile condition is evaluated at
  the end of each iteration, where the simulator reads its value (a tile of one element).

Both are judged when Python asks the tile for its truth value (``NKITensor.__bool__``). Whether that is a
``while`` test at the loop's entry or at its back edge comes from the kernel's bytecode: CPython evaluates
the test of a ``while`` once before the body (entry) and once after it (the back edge). Where that cannot be
told apart (another Python), the test counts as a back edge: no error rather than a false one.
NKI 0.2's device loops (``while reg:``, ``nl.while_loop``) are true while loops (AWS's reference:
"not do-while"), so these rules are the legacy dialect's only.
"""
from __future__ import annotations

import ast
import inspect
import sys
import textwrap
from types import CodeType, FrameType
from typing import Any, Optional

from ..errors import NKITypeError, _is_internal
from .source import parse as _parse_source

__all__ = ["tile_truth_value"]

# code -> [(test span, offset of the body's first instruction or None)], a span ((line, col), (line, col))
_WHILE_CACHE: "dict[CodeType, list]" = {}


def tile_truth_value(tensor: Any) -> bool:
    """``bool(tile)`` in a legacy kernel: the value of a one-element tile at a do-while's back edge, else
    the rule the use breaks."""
    frame = _kernel_frame(sys._getframe(2))
    if tensor.size != 1:
        raise NKITypeError("err_ambiguous_tensor_truth_value",
                           f"Cannot evaluate truth value of a multi-element tensor: a tensor of shape "
                           f"{tuple(tensor.shape)} has no truth value; use '~', '&', '|' instead of 'not', "
                           f"'and', 'or', and 'is None' / 'is not None' to test an optional tensor", frame=frame)
    where = _while_test(frame) if frame is not None else None
    if where == "entry":
        raise NKITypeError("err_while_loop_requires_unconditional_entry",
                           "Traditional while loops are not supported - use do-while pattern instead: the "
                           "condition depends on a tile and is checked before the first iteration; enter the "
                           "loop unconditionally ('cond = True' before 'while cond:') and compute the condition "
                           "at the end of the body", frame=frame)
    if where is None:
        raise NKITypeError("err_dynamic_control_flow_not_supported",
                           "Dynamic control-flow depending on tensor value is not supported: a tile has no truth "
                           "value while the kernel is compiled ('if', 'not', 'and'/'or', conditional "
                           "expressions); select with nl.where or mask= instead", frame=frame)
    return bool(tensor.read().reshape(-1)[0])


def _kernel_frame(frame: Optional[FrameType]) -> Optional[FrameType]:
    while frame is not None and _is_internal(frame.f_code.co_filename):
        frame = frame.f_back
    return frame


def _while_test(frame: FrameType) -> Optional[str]:
    """'entry' or 'back edge' when the frame evaluates the test of a ``while``, else None."""
    code = frame.f_code
    loops = _WHILE_CACHE.get(code)
    if loops is None:
        loops = _WHILE_CACHE[code] = _while_loops(code)
    if not loops:
        return None
    positions = list(code.co_positions())
    index = frame.f_lasti // 2
    if not 0 <= index < len(positions) or positions[index][0] is None:
        return None
    line, _, col, _ = positions[index]
    here = (line, col if col is not None else 0)
    inside = [(span, body) for span, body in loops if span[0] <= here <= span[1]]
    if not inside:
        return None
    span, body = min(inside, key=lambda s: (s[0][1][0] - s[0][0][0], s[0][1][1] - s[0][0][1]))
    return "entry" if body is not None and frame.f_lasti < body else "back edge"


def _while_loops(code: CodeType) -> list:
    try:
        lines, first = inspect.getsourcelines(code)
    except (OSError, TypeError):
        return []
    source = "".join(lines)
    dedented = textwrap.dedent(source)
    indent = len(lines[0]) - len(lines[0].lstrip()) if dedented != source else 0
    try:
        tree = _parse_source(dedented)
    except SyntaxError:
        return []

    def at(line: int, col: int) -> tuple:
        return line + first - 1, col + indent

    positions = [(offset * 2, p) for offset, p in enumerate(code.co_positions()) if p[0] is not None]
    loops = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.While):
            continue
        # From the 'while' keyword (CPython places the conditional jump at the statement) to the test's end.
        t = node.test
        span = (at(node.lineno, node.col_offset), at(t.end_lineno, t.end_col_offset))
        start = at(node.body[0].lineno, node.body[0].col_offset)
        end = at(node.body[-1].end_lineno, node.body[-1].end_col_offset)
        body = [offset for offset, (l, _, c, _) in positions if start <= (l, c or 0) <= end]
        test_after_body = body and any(offset > min(body) and span[0] <= (l, c or 0) <= span[1]
                                       for offset, (l, _, c, _) in positions)
        # Without a copy of the test after the body (no loop inversion), entry and back edge look alike.
        loops.append((span, min(body) if test_after_body else None))
    return loops
