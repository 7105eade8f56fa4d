"""``neuronxcc.nki.isa.constants``: the enumerations of the legacy ``nki.isa`` under the module name AWS's
SDK examples import them from (the same objects as ``nki.isa.constants``)."""
from ..._isa_common import dge_mode, dma_engine, engine, matmul_perf_mode, nc_version, oob_mode, reduce_cmd  # noqa: F401

__all__ = ["dge_mode", "dma_engine", "engine", "matmul_perf_mode", "nc_version", "oob_mode", "reduce_cmd"]
