"""``nki.typing``: annotations for kernel parameters (``nt.tensor[shape, dtype]``, ``nt.mutable_tensor``)."""
from __future__ import annotations

from typing import Any


class _TensorType:
    """``nt.tensor`` / ``nt.mutable_tensor``; subscripting gives an annotation carrying shape and dtype."""

    def __init__(self, name: str, mutable: bool, shape: Any = None, dtype: Any = None) -> None:
        self.name, self.mutable, self.shape, self.dtype = name, mutable, shape, dtype

    def __getitem__(self, spec: Any) -> "_TensorType":
        shape, dtype = spec, None
        if isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[0], (list, tuple)):
            shape, dtype = tuple(spec[0]), spec[1]
        return _TensorType(self.name, self.mutable, shape, dtype)

    def __repr__(self) -> str:
        return f"nt.{self.name}" + (f"[{self.shape}]" if self.shape is not None else "")


tensor = _TensorType("tensor", False)
mutable_tensor = _TensorType("mutable_tensor", True)
scalar = float


def is_mutable(annotation: Any) -> bool:
    if isinstance(annotation, str):  # postponed annotations (from __future__ import annotations)
        return annotation.split("[")[0].endswith("mutable_tensor")
    return isinstance(annotation, _TensorType) and annotation.mutable
