"""``nki.isa.constants``: the enumerations of ``nki.isa`` under the module name AWS's kernels import them from."""
from .._isa_common import dge_mode, dma_engine, engine, matmul_perf_mode, nc_version, oob_mode, reduce_cmd  # noqa: F401

__all__ = ["dge_mode", "dma_engine", "engine", "matmul_perf_mode", "nc_version", "oob_mode", "reduce_cmd"]
