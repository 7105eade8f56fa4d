"""`torch.neuron.amp`: autocast for neuron, bfloat16 by default as on Trainium."""
from __future__ import annotations

from typing import Any, Optional

import torch


class autocast(torch.amp.autocast):
    """`torch.neuron.amp.autocast(dtype=torch.bfloat16)`, the same as `torch.autocast("neuron")`."""

    def __init__(self, enabled: bool = True, dtype: Optional[torch.dtype] = None, cache_enabled: bool = True):
        super().__init__("neuron", enabled=enabled, dtype=dtype or torch.bfloat16, cache_enabled=cache_enabled)

    def __enter__(self) -> Any:
        return super().__enter__()

    def __exit__(self, *args: Any) -> Any:
        return super().__exit__(*args)
