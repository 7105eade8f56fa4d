"""``nki.language.dtypes`` (also ``nki.dtype``'s values): the NKI data types under the module name AWS's
simulator harness imports them from."""
from ..dtypes import *  # noqa: F401,F403
