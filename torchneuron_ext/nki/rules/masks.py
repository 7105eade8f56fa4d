"""The legacy front end's rule on mask expressions (``err_unsupported_expression_in_mask``).

AWS's error-code page: a ``mask=`` must be an affine expression of static loop indices (a linear
combination ``a*i + b*j + c`` of loop indices and ``nl.arange``/``nl.mgrid`` indices, compared with
constants); runtime values (tensor elements) and non-affine operations (``i % 4``) are refused, also for a
loop over Python's ``range``. Two halves:

- Static, on the kernel's source (the simulator's loop indices are Python integers, so ``(i % 4) < 2`` is a
  plain bool by the time an instruction sees it): in a ``mask=`` argument, ``%``, ``//``, ``/``, ``**``,
  shifts on an index, or a product of two indices, directly or through a name assigned such an
  expression. Indices are the targets of the kernel's ``for`` loops and names assigned from
  ``nl.arange``/``nl.mgrid`` or from expressions of indices. Helpers the kernel calls are not read.
- At the instruction: a mask that is a tile (``mask=t > 2`` compares a tile) is a runtime value.

NKI 0.2 has no ``mask=``: the rule is the legacy dialect's.
"""
from __future__ import annotations

import ast
import linecache
from types import CodeType
from typing import Any, Callable, Iterable, Optional

from ..errors import NKIError, NKITypeError
from .source import kernel_ast

__all__ = ["check", "tile_mask"]

_NON_AFFINE = {ast.Mod: "%", ast.FloorDiv: "//", ast.Div: "/", ast.Pow: "**", ast.LShift: "<<",
               ast.RShift: ">>"}
_CACHE: "dict[CodeType, Optional[tuple]]" = {}


def _names(node: ast.AST) -> "set[str]":
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _makes_index(node: ast.AST) -> bool:
    """``nl.arange(...)`` or ``nl.mgrid[...]`` somewhere in the expression."""
    for n in ast.walk(node):
        if isinstance(n, ast.Call) and isinstance(n.func, (ast.Attribute, ast.Name)) \
                and (n.func.attr if isinstance(n.func, ast.Attribute) else n.func.id) == "arange":
            return True
        if isinstance(n, ast.Subscript) and isinstance(n.value, (ast.Attribute, ast.Name)) \
                and (n.value.attr if isinstance(n.value, ast.Attribute) else n.value.id) == "mgrid":
            return True
    return False


def _arithmetic(node: ast.AST) -> bool:
    """An expression of indices and numbers, not an instruction's result (a tile is no index)."""
    return not any(isinstance(n, ast.Call) and not (isinstance(n.func, ast.Name) and n.func.id in _SCALAR_CALLS)
                   for n in ast.walk(node))


_SCALAR_CALLS = {"min", "max", "int", "len", "abs"}


def _non_affine(node: ast.AST, indices: "set[str]", tainted: "set[str]") -> Optional[ast.AST]:
    """The first sub-expression of ``node`` that is not affine in the indices, if any."""
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and n.id in tainted:
            return n
        if isinstance(n, ast.BinOp):
            left, right = _names(n.left) & indices, _names(n.right) & indices
            if type(n.op) in _NON_AFFINE and (left or right):
                return n
            if isinstance(n.op, (ast.Mult, ast.MatMult)) and left and right:
                return n
    return None


def _stored(target: ast.AST) -> "set[str]":
    """The names an assignment binds (``t[i] = ...`` binds none: it writes into ``t``)."""
    return {n.id for n in ast.walk(target) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _assignments(tree: ast.AST) -> Iterable[tuple]:
    """(bound names, value) of every assignment in the kernel."""
    for n in ast.walk(tree):
        if isinstance(n, ast.Assign):
            yield set().union(*(_stored(t) for t in n.targets)), n.value
        elif isinstance(n, (ast.AnnAssign, ast.AugAssign)) and n.value is not None:
            yield _stored(n.target), n.value


def _violation(tree: ast.AST) -> Optional[tuple]:
    """(line, the offending expression) of the first mask that is not affine in the loop indices."""
    indices = set().union(*(_stored(n.target) for n in ast.walk(tree) if isinstance(n, (ast.For, ast.comprehension))))
    tainted: "set[str]" = set()
    bindings = list(_assignments(tree))
    changed = True
    while changed:  # indices and non-affine names flow through assignments, in any order of the source
        changed = False
        for targets, value in bindings:
            if not targets:
                continue
            if (_names(value) & indices and _arithmetic(value) or _makes_index(value)) and not targets <= indices:
                indices |= targets
                changed = True
            if _arithmetic(value) and _non_affine(value, indices, tainted) is not None and not targets <= tainted:
                tainted |= targets
                changed = True
    masks = [kw.value for n in ast.walk(tree) if isinstance(n, ast.Call) for kw in n.keywords if kw.arg == "mask"]
    for mask in sorted(masks, key=lambda m: (m.lineno, m.col_offset)):
        bad = _non_affine(mask, indices, tainted)
        if bad is not None:
            return mask.lineno, ast.unparse(bad), isinstance(bad, ast.Name)
    return None


def check(func: Callable) -> None:
    """Before a legacy launch: reject a kernel with a mask that is not an affine expression of indices."""
    code = func.__code__
    if code not in _CACHE:
        found = None
        tree, first = kernel_ast(func)
        if tree is not None:
            hit = _violation(tree)
            if hit is not None:
                found = (hit[0] + first - 1, hit[1], hit[2])
        _CACHE[code] = found
    found = _CACHE[code]
    if found is None:
        return
    line, expr, through_name = found
    what = (f"'{expr}' is assigned a non-affine expression of loop indices" if through_name
            else f"'{expr}' is not an affine expression")
    raise NKIError.at("err_unsupported_expression_in_mask",
                      f"NKI mask expressions must be affine expressions of static loop indices: {what} "
                      f"(only a*i + b*j + c compared with constants); compute such a selection with "
                      f"nl.where or an iota tile instead",
                      (code.co_filename, line, code.co_name, linecache.getline(code.co_filename, line) or None))


def tile_mask(mask: Any) -> None:
    """An instruction got a tile as its mask: a runtime value, never an affine expression."""
    raise NKITypeError("err_unsupported_expression_in_mask",
                       f"NKI mask expressions must be affine expressions of static loop indices: this mask is a "
                       f"tile of shape {tuple(mask.shape)} (a runtime value); select with nl.where instead",
                       frame=None)
