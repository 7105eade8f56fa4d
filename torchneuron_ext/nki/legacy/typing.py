"""``neuronxcc.nki.typing``: the same annotations as ``nki.typing``."""
from ..typing import is_mutable, mutable_tensor, scalar, tensor  # noqa: F401
