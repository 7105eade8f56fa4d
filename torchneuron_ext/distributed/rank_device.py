"""One NeuronCore per rank under torchrun, as TorchNeuron does it.

torchrun starts one process per core and tells each its ``LOCAL_RANK``.
Setting ``NEURON_RT_VISIBLE_CORES`` to that rank before the runtime starts
makes each process see exactly its own core as ``neuron:0`` (the runtime
reads the variable when it initialises, so this runs at import).
"""
from __future__ import annotations

import os


def select_rank_core(environ: "os._Environ[str] | dict[str, str] | None" = None) -> str | None:
    """Set ``NEURON_RT_VISIBLE_CORES`` from ``LOCAL_RANK`` unless the user chose cores already.

    Returns the core list now in effect for this process, or None when the
    process is not a torchrun worker and nothing was chosen.
    """
    env = os.environ if environ is None else environ
    if "NEURON_RT_VISIBLE_CORES" in env:
        return env["NEURON_RT_VISIBLE_CORES"]
    local_rank = env.get("LOCAL_RANK")
    if local_rank is None or "NEURON_RT_NUM_CORES" in env:
        # An explicit core count is the user's choice of layout: every rank
        # then sees all those cores and picks one with torch.neuron.set_device.
        return None
    if not local_rank.strip().isdigit():
        raise ValueError(f"LOCAL_RANK='{local_rank}' is not a non-negative integer; torchrun sets it per worker")
    env["NEURON_RT_VISIBLE_CORES"] = local_rank.strip()
    return env["NEURON_RT_VISIBLE_CORES"]
