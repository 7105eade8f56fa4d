"""TorchNeuron's environment variables: which the emulator honours, and a notice for the others.

Each variable that TorchNeuron's documentation names (docs/environment_variables.md of torch-neuronx,
the Neuron 2.33 env-var reference, the runtime variables its tests set) is listed in ``VARIABLES`` with
its meaning on real hardware and what the emulator does with it:

- ``HONOURED``: the emulator has the equivalent and behaves as the variable asks;
- ``IMPLIED``: the emulator always behaves one way; the value that asks for that behaviour is honoured,
  any other value gets the notice (for example ``NEURON_LAUNCH_BLOCKING=0``: execution is always
  synchronous here);
- ``NOT_APPLICABLE``: the variable controls something the emulator does not have (neuronx-cc, NEFF
  caches, NRT's asynchronous queues, StableHLO lowering, XLA collectives, ...).

:func:`check_environment` (run when ``torch_neuronx`` is imported) emits one
:class:`NotApplicableEnvWarning` per variable that is set and not honoured, once per process.
"""
from __future__ import annotations

import dataclasses
import os
import threading
import warnings
from typing import Optional

from ... import _env

__all__ = ["HONOURED", "IMPLIED", "NOT_APPLICABLE", "EnvVar", "NotApplicableEnvWarning", "VARIABLES",
           "ACKNOWLEDGED_VAR", "check_environment", "not_applicable_set", "status"]

HONOURED = "honoured"
IMPLIED = "implied"
NOT_APPLICABLE = "not applicable"



class NotApplicableEnvWarning(UserWarning):
    """A TorchNeuron environment variable is set that the emulator has no equivalent for."""


@dataclasses.dataclass(frozen=True)
class EnvVar:
    name: str
    meaning: str  # what it does on real Trainium with TorchNeuron
    status: str  # HONOURED, IMPLIED or NOT_APPLICABLE
    emulator: str  # what the emulator does instead / how it honours it
    # IMPLIED only: the values that ask for what the emulator always does (lower case).
    implied_values: tuple[str, ...] = ()


def _v(name: str, meaning: str, status: str, emulator: str, implied: tuple[str, ...] = ()) -> EnvVar:
    return EnvVar(name, meaning, status, emulator, implied)


_NO_COMPILER = "the emulator runs ATen's host kernels; there is no neuronx-cc, StableHLO or NEFF"
_NO_NEFF_CACHE = "the emulator compiles no NEFFs, so there is no NEFF cache"
_NO_CONCATENATION = "no concatenation engine"
_NO_LOG = "the emulator reports through Python warnings and exceptions"
_OP_STATS = "use torchneuron_ext.profiler.op_stats()"
_UNSPLIT_COLLECTIVES = "collectives run in gloo on zero-copy views, unsplit"

VARIABLES: dict[str, EnvVar] = {v.name: v for v in [
    # --- Runtime / devices
    _v("NEURON_RT_NUM_CORES", "number of logical NeuronCores the process uses", HONOURED,
       "number of emulated NeuronCores (default 2)"),
    _v("NEURON_RT_VISIBLE_CORES", "which NeuronCores the process sees, e.g. 0-3 or 1,3", HONOURED,
       "which emulated cores are visible (wins over NEURON_RT_NUM_CORES)"),
    _v("NEURON_LOGICAL_NC_CONFIG", "logical NeuronCore size (LNC): 1 or 2 physical cores per device", HONOURED,
       "reported by torch_neuronx.utils.get_logical_neuron_cores(); each emulated core keeps its HBM "
       "capacity (NEURON_EMU_HBM_SIZE)"),
    _v("NEURON_RT_VIRTUAL_CORE_SIZE", "older name of the logical NeuronCore size", NOT_APPLICABLE,
       "use NEURON_LOGICAL_NC_CONFIG"),
    _v("NEURON_RT_ROOT_COMM_ID", "address:port of the collectives' root (set per rank by TorchNeuron)",
       NOT_APPLICABLE, "collectives rendezvous through torch.distributed's store (MASTER_ADDR/MASTER_PORT)"),
    _v("NEURON_RT_ENABLE_HOST_CC", "host collectives with a pool of 3 streams per device (otherwise every "
       "user stream is the default stream)", IMPLIED,
       "streams are always distinct streams with their own ids", _env.ON),
    _v("NEURON_RT_DBG_ZEROCOPY", "zero-copy tensor transfers in NRT", IMPLIED,
       "device memory is host memory: kernels never copy", _env.ON),
    _v("NEURON_RT_ALLOW_LEGACY_NEFF", "let NRT load NEFFs of older compilers", NOT_APPLICABLE, _NO_COMPILER),
    _v("NEURON_RT_INSPECT_ENABLE", "NRT's environment-driven profile capture", NOT_APPLICABLE,
       "profile with torch.profiler and torchneuron_ext.profiling.NeuronConfig"),
    # --- Eager execution
    _v("NEURON_LAUNCH_BLOCKING", "1: every op waits for its execution (synchronous mode); 0: asynchronous "
       "queues", IMPLIED, "execution is always synchronous: an op has finished when its call returns", _env.ON),
    _v("TORCH_NEURONX_ENABLE_ASYNC_NRT", "asynchronous NRT execution (nrta)", IMPLIED,
       "execution is always synchronous", _env.OFF),
    _v("TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS", "1: an op that fails on Neuron raises instead of "
       "re-running on CPU (only unimplemented ops fall back)", HONOURED,
       "either value behaves alike: no op fails on the device where the CPU succeeds, and errors raise with "
       "the CPU kernel's message"),
    _v("TORCH_NEURONX_ENABLE_STACK_TRACE", "capture a Python stack per op", NOT_APPLICABLE,
       "use torch.profiler(with_stack=True)"),
    _v("TORCH_NEURONX_MLIR_ATEN_OPS", "lower ATen ops through torch-mlir (1) or the older JAX/XLA paths (0)",
       NOT_APPLICABLE, _NO_COMPILER),
    _v("TORCH_NEURONX_ENABLE_STABLEHLO", "StableHLO lowering of eager ops", NOT_APPLICABLE, _NO_COMPILER),
    _v("TORCH_NEURONX_SKIP_OP_PRECONDITIONS", "skip the lowerings' precondition checks", NOT_APPLICABLE,
       _NO_COMPILER),
    _v("TORCH_NEURONX_ATEN_GMM_ALIGN", "offset alignment of the grouped-matmul lowering", NOT_APPLICABLE,
       "torch._grouped_mm runs ATen's kernel, which takes any offsets"),
    _v("TORCH_NEURONX_COMPLEX_DECOMPOSE", "decompose complex ops before lowering", NOT_APPLICABLE,
       "complex dtypes run ATen's complex kernels"),
    _v("TORCH_NEURONX_ENABLE_CONCATENATION", "fuse queued eager ops into one NEFF (adaptive eager execution)",
       NOT_APPLICABLE, "eager ops run one by one, synchronously"),
    _v("TORCH_NEURONX_CONCATENATION_BUFFER_SIZE_LIMIT", "op buffer of the concatenation engine", NOT_APPLICABLE,
       _NO_CONCATENATION),
    _v("TORCH_NEURONX_CONCATENATION_QUEUE_LOW_THRESHOLD", "queue depth below which ops are not fused",
       NOT_APPLICABLE, _NO_CONCATENATION),
    _v("TORCH_NEURONX_CONCATENATION_APPLY_SKIP_INTERMEDIATE", "skip unreferenced intermediates of fused ops",
       NOT_APPLICABLE, _NO_CONCATENATION),
    _v("TORCH_NEURONX_ENABLE_NKI_SDPA", "route SDPA to the built-in NKI flash-attention kernel",
       NOT_APPLICABLE, "SDPA runs ATen's kernels"),
    # --- Compiler and NEFF caches
    _v("NEURON_CC_FLAGS", "extra neuronx-cc flags", NOT_APPLICABLE, _NO_COMPILER),
    _v("NEURON_COMPILER_OPT_LEVEL", "neuronx-cc optimisation level", NOT_APPLICABLE, _NO_COMPILER),
    _v("TORCH_NEURONX_NEURONX_CC_TIMEOUT", "timeout of a neuronx-cc run", NOT_APPLICABLE, _NO_COMPILER),
    _v("TORCH_NEURONX_NEFF_CACHE_DIR", "persistent NEFF cache directory (default /tmp/neff_cache)",
       NOT_APPLICABLE, _NO_NEFF_CACHE),
    _v("TORCH_NEURONX_DISABLE_NEFF_CACHE", "1: no persistent NEFF cache", NOT_APPLICABLE, _NO_NEFF_CACHE),
    _v("TORCH_NEURONX_NEFF_DISABLE_CACHE", "the code's spelling of TORCH_NEURONX_DISABLE_NEFF_CACHE",
       NOT_APPLICABLE, _NO_NEFF_CACHE),
    _v("NEURON_COMPILATION_CACHE_MAX_SIZE_MB", "size limit of the in-memory NEFF cache", NOT_APPLICABLE,
       _NO_NEFF_CACHE),
    _v("NEURON_COMPILATION_CACHE_MAX_ENTRIES", "entry limit of the in-memory NEFF cache", NOT_APPLICABLE,
       _NO_NEFF_CACHE),
    # --- torch.compile(backend="neuron")
    _v("TORCH_NEURONX_DEBUG_DIR", "where compilation artifacts (FX, StableHLO, NEFF) are written",
       NOT_APPLICABLE, "the neuron compile backend is Inductor's C++ backend; use TORCH_COMPILE_DEBUG=1"),
    _v("TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS", "keep the compilation artifacts", NOT_APPLICABLE,
       "use TORCH_COMPILE_DEBUG=1"),
    _v("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION", "1: a graph that fails on Neuron raises instead of running "
       "eagerly", IMPLIED, "a compiled graph that fails raises", _env.ON),
    _v("TORCH_NEURONX_RETAIN_DEVICE_MODE", "1: compiled outputs return on the inputs' original device",
       NOT_APPLICABLE, "compiled outputs are where the graph computes them, as with Inductor"),
    _v("TORCH_NEURONX_DYNAMO_DISABLE_CPU_AUTOCOPY", "1: CPU inputs to a compiled graph raise instead of being "
       "copied to neuron", NOT_APPLICABLE, "compiled graphs take their inputs where they are, as with Inductor"),
    # --- Logging and metrics
    _v("TORCH_NEURONX_LOG_LEVEL", "C++ log level 0-3 (ERROR, WARNING, INFO, DEBUG)", NOT_APPLICABLE, _NO_LOG),
    _v("TORCH_NEURONX_LOG_FILE", "file the C++ log goes to", NOT_APPLICABLE, _NO_LOG),
    _v("TORCH_NEURONX_METRICS_ENABLED", "runtime counters of torch_neuronx.metrics", NOT_APPLICABLE,
       "use torchneuron_ext.get_op_counts() and torchneuron_ext.profiler.op_stats()"),
    _v("TORCH_NEURONX_ENABLED_METRIC_TABLES", "metric tables exported as CSV", NOT_APPLICABLE, _OP_STATS),
    _v("TORCH_NEURONX_METRICS_DIR", "directory of the metric CSV files", NOT_APPLICABLE, _OP_STATS),
    # --- Distributed
    _v("NEURON_USE_SPLIT_ALLGATHER", "split large all-gathers into buckets", NOT_APPLICABLE, _UNSPLIT_COLLECTIVES),
    _v("NEURON_USE_SPLIT_REDUCE_SCATTER", "split large reduce-scatters into buckets", NOT_APPLICABLE,
       _UNSPLIT_COLLECTIVES),
    _v("COLLECTIVE_BUCKETSIZE_IN_MB", "bucket size of split collectives (512)", NOT_APPLICABLE, _UNSPLIT_COLLECTIVES),
    _v("COLLECTIVE_MIN_BUCKETS", "minimum number of buckets of split collectives", NOT_APPLICABLE,
       _UNSPLIT_COLLECTIVES),
    _v("TORCH_NEURONX_ENABLE_HOST_CC", "host collectives on a side stream", NOT_APPLICABLE,
       "collectives always run on the host (gloo)"),
]}

# Comma-separated names set on purpose (by the test-suite plugin): no notice for them, here or in children.
ACKNOWLEDGED_VAR = "TORCHNEURON_EXT_ENV_ACKNOWLEDGED"

_lock = threading.Lock()
_reported: set[str] = set()


def status(name: str, value: Optional[str] = None) -> Optional[str]:
    """HONOURED, IMPLIED, NOT_APPLICABLE for a TorchNeuron variable with this value (None: unknown name).

    An IMPLIED variable whose value asks for something else than what the emulator always does is
    NOT_APPLICABLE.
    """
    var = VARIABLES.get(name)
    if var is None:
        return None
    if var.status == IMPLIED and value is not None and value.strip().lower() not in var.implied_values:
        return NOT_APPLICABLE
    return var.status


def not_applicable_set(environ: Optional[dict] = None) -> list[str]:
    """Names of the TorchNeuron variables set in ``environ`` (default os.environ) that are not honoured."""
    env = os.environ if environ is None else environ
    return [n for n in VARIABLES if n in env and status(n, env[n]) == NOT_APPLICABLE]


def _message(name: str, value: str) -> str:
    var = VARIABLES[name]
    return (f"{name}={value!r} is not applicable on the emulated neuron device and is ignored: on Trainium it "
            f"sets {var.meaning}; here {var.emulator} (docs/torch_neuronx.md lists every variable)")


def check_environment(environ: Optional[dict] = None) -> list[str]:
    """Warn once per process for each TorchNeuron variable that is set and has no equivalent here.

    Returns the names warned about by this call (variables already reported are not reported again).
    """
    env = os.environ if environ is None else environ
    fresh = []
    acknowledged = set(env.get(ACKNOWLEDGED_VAR, "").split(","))
    with _lock:
        for name in not_applicable_set(env):
            if name in acknowledged:
                continue
            if name not in _reported:
                _reported.add(name)
                fresh.append(name)
    for name in fresh:
        warnings.warn(_message(name, env[name]), NotApplicableEnvWarning, stacklevel=3)
    return fresh


def _reset_reported() -> None:
    """Forget what was reported (tests)."""
    with _lock:
        _reported.clear()
