"""The old path of ``torchneuron_ext.nki.torch.interop`` (NKI's torch integration moved to nki/torch/).

Kept because users and tests import it by this name; it is that module itself, not a copy.
"""
from __future__ import annotations

import sys

from .torch import interop as _moved

sys.modules[__name__] = _moved
