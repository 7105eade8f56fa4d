"""AWS's nccom-test outputs: all-reduce, all-gather, permute, all-gather-v and all-to-all-v size sweeps, as
published in the NCCOM-TEST User Guide (aws-neuron-sdk ``tools/neuron-sys-tools/nccom-test.rst``).

nccom-test generates and runs NEFFs of collective instructions through the Neuron runtime, with no framework;
its ``time`` column is the mean duration of one collective operation on the device (DEVICE). ``size(B)`` is
the collective's buffer: all-reduce's input and output, all-gather's output (each rank contributes
size/ranks), reduce-scatter's input. Each row is projected with ``costmodel.collective`` on the published
size and ranks, one rank's bytes read and written as the runtime records them.

Where each output comes from (the commit that added it to the page; the time column is AWS's: H). The page
names no instance type: the outputs added in 2023 (Neuron 2.10, when nccom-test supported trn1 and inf2 only,
with 32 ranks per instance and 2 instances of 32 ranks) are trn1's (M); the ones added from 2025 on name
none and are taken as trn2's, the generation the runtime's notes of those releases are about (L), except
the 16-rank sweep whose KangaRing algorithm is Trn2's (M).
"""
from __future__ import annotations

from torchneuron_ext import costmodel

from . import DEVICE, Row

PAGE = "aws-neuron-sdk tools/neuron-sys-tools/nccom-test.rst"
R210 = f"{PAGE} @f5d2d79a (Neuron 2.10, 2023-05)"
R224 = f"{PAGE} @90a7fe4b (Neuron 2.24, 2025-06)"
R226 = f"{PAGE} @8fb0d7c8 (2025-11)"
R228 = f"{PAGE} @86a92868 (Neuron 2.28, 2026-02)"
R232 = f"{PAGE} @a3247f5b (Neuron 2.32, 2026-08)"

# One rank's (bytes read, bytes written) for a collective of `size` bytes over `ranks`, and the name the
# neuron process group records it under.
OPS = {
    "all-reduce": ("c10d::allreduce_", lambda size, ranks: (size, size)),
    "all-gather": ("c10d::allgather_into_tensor_", lambda size, ranks: (size // ranks, size)),
    "all-gather-v": ("c10d::allgather_into_tensor_", lambda size, ranks: (size // ranks, size)),
    "all-to-all-v": ("c10d::alltoall_base_", lambda size, ranks: (size, size)),
    "permute": ("c10d::send", lambda size, ranks: (size, size)),
}


def _human(size: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} B"


def _projector(op: str, size: int, ranks: int, target: str):
    name, rw = OPS[op]
    read, written = rw(size, ranks)
    return lambda: costmodel.collective(name, read, written, ranks, costmodel.get_target(target)).duration_s


def sweep(op: str, ranks: int, instances: int, dtype: str, target: str, source: str,
          points: list[tuple[int, float]], reason=lambda size, us: "", note: str = "") -> list[Row]:
    """One published nccom-test table: (size in bytes, time in us) per line."""
    where = f"{ranks} ranks, {'1 instance' if instances == 1 else f'{instances} instances'}"
    kernel = f"nccom-test {op}, {where}{note}"
    return [Row("collectives", kernel, _human(size), dtype, target, us * 1e-6, DEVICE, source,
                _projector(op, size, ranks, target), reason(size, us))
            for size, us in points]


# trn1, Neuron 2.10: 2-rank all-reduce, 1 KiB to 1 GiB by 4x (fp32), and the page's first example (32 MiB uint8).
TRN1_2RANK = [(1024, 58), (4096, 58), (16384, 58), (65536, 58), (262144, 60), (1048576, 68), (4194304, 107),
              (16777216, 332), (67108864, 1214), (268435456, 4750), (1073741824, 18930)]
# trn1, Neuron 2.10: 32-rank all-gather, 1 KiB to 512 KiB by 8x (fp32, with --check).
TRN1_32RANK_ALLG = [(1024, 151), (8192, 149), (65536, 150), (524288, 179)]
# trn1, Neuron 2.10: 64-rank all-reduce over 2 instances, 8 B to 1 GiB by 2x (fp32, 50 ops).
TRN1_2X32 = [(8, 520), (16, 520), (32, 523), (64, 525), (128, 553), (256, 709), (512, 782), (1024, 840),
             (2048, 881), (4096, 916), (8192, 1013), (16384, 1031), (32768, 1174), (65536, 1315),
             (131072, 1315), (262144, 1311), (524288, 1312), (1048576, 1328), (2097152, 1329), (4194304, 1378),
             (8388608, 1419), (16777216, 2138), (33554432, 2711), (67108864, 3963), (134217728, 6279),
             (268435456, 11954), (536870912, 21803), (1073741824, 41806)]
# Neuron 2.24: the 32-rank all-gather again (--show-input-output-size; the --report-to-json-file run beside
# it printed 6.19, 6.55, 8.18, 23.11 us).
R224_32RANK_ALLG = [(1024, 6.16), (8192, 6.48), (65536, 8.17), (524288, 23.16)]
# Neuron 2.28: 8-rank all-gather, --stats, 1000 iterations: the mean.
R228_8RANK_ALLG = [(1024, 10.0), (8192, 10.22), (65536, 11.31), (524288, 14.83)]
# Neuron 2.28: 16-rank all-reduce, 4 B to 1 GiB by 16x, --show-algorithm (mesh to 8 KiB and at 128 KiB, rdh at
# 2 MiB, kangaring from 32 MiB).
R228_16RANK_ALLR = [(4, 299.91), (32, 299.69), (512, 299.82), (8192, 299.74), (131072, 574.15), (2097152, 686.32),
                    (33554432, 2754.15), (536870912, 9689.51)]
# Neuron 2.32: 64-rank all-gather (bf16), stream 0 of a two-stream run (--streams-json).
R232_64RANK_ALLG = [(1024, 101.14), (2048, 101.93), (4096, 101.45), (8192, 101.84), (16384, 102.21),
                    (32768, 102.36), (65536, 103.28), (131072, 105.03), (262144, 107.37), (524288, 110.07),
                    (1048576, 117.67)]

NEWER_FLOOR = ("a later runtime's small-size time (6-16 us here) is far below the floor the model takes from "
               "the same generation's other sweep (trn2: 101 us at 64 ranks in 2.32; trn1: 58 us in 2.10); the "
               "model has one floor per target and cannot tell which release or instance a figure comes from")
TRN1_2X32_SMALL = ("below 64 MiB the 2.10 runtime's 2-instance times (520-2711 us) are 1.5-17x the "
                   "hierarchical algorithm with 15 us EFA steps; Neuron 2.24's runtime notes 'reduced the average latency of "
                   "32x2 collective groups by 65%': the measurement predates that, and its size steps (520 us "
                   "at 8 B, 1315 us from 64 KiB) follow no documented mechanism")


def _trn1_2x32_reason(size: int, us: float) -> str:
    return TRN1_2X32_SMALL if size < 64 << 20 else ""


def _r228_16_reason(size: int, us: float) -> str:
    if size >= 512 << 20:
        return ""
    return ("this sweep runs 3x (mesh, small) to 5x (rdh, kangaring at 32 MiB) slower than the model and "
            "than the same release's 8-rank all-gather (10 us); a 300 us floor at 16 ranks is documented "
            "nowhere else")


ROWS = (
    sweep("all-reduce", 2, 1, "uint8", "trn1", f"{R210}, first example (H; trn1 M)", [(33554432, 768)])
    + sweep("all-reduce", 2, 1, "fp32", "trn1", f"{R210} (H; trn1 M)", TRN1_2RANK)
    + sweep("all-gather", 32, 1, "fp32", "trn1", f"{R210} (H; trn1 M)", TRN1_32RANK_ALLG,
            lambda size, us: "the 2.10 runtime's 32-rank all-gather took ~150 us at small sizes where its "
                             "2-rank all-reduce took 58 us: its per-rank cost (~3 us a rank, a ring's hops) is "
                             "gone from the documented algorithms (Mesh: one step below 1 MB), which the "
                             "model follows; the 2.24 run of the same command took 6 us")
    + sweep("all-reduce", 64, 2, "fp32", "trn1", f"{R210} (H; trn1 M: 2 instances of 32 ranks)", TRN1_2X32,
            _trn1_2x32_reason)
    + sweep("all-gather", 32, 1, "fp32", "trn2", f"{R224} (H; instance not named, trn2 L)", R224_32RANK_ALLG,
            lambda size, us: NEWER_FLOOR)
    + sweep("permute", 8, 1, "uint8", "trn2", f"{R226}, pairs 0<->1, 2<->3, 4-7 to themselves "
            "(H; instance not named, trn2 L)", [(33554432, 894.24)],
            lambda size, us: "a pairwise exchange at 40 GB/s, a third of the trn2 NeuronLink port rate the "
                             "model uses (128 GB/s) and trn1's port rate (48 GB/s): if the instance was a "
                             "trn1, the model's 0.76 ms would be 0.85x")
    + sweep("all-gather", 8, 1, "fp32", "trn2", f"{R228}, --stats mean (H; instance not named, trn2 L)",
            R228_8RANK_ALLG, lambda size, us: NEWER_FLOOR)
    + sweep("all-reduce", 16, 1, "fp32", "trn2", f"{R228}, --show-algorithm (H; trn2 M: KangaRing)",
            R228_16RANK_ALLR, _r228_16_reason)
    + sweep("all-gather-v", 4, 1, "fp16", "trn2", f"{R232} (H; instance not named, trn2 L)", [(2048, 16.28)],
            lambda size, us: NEWER_FLOOR)
    + sweep("all-gather", 64, 1, "bf16", "trn2", f"{R232}, stream 0 of 2 (H; trn2 M: 64 ranks in one "
            "instance)", R232_64RANK_ALLG, note=", stream 0 of 2")
    + sweep("all-gather", 64, 1, "fp32", "trn2", f"{R232}, stream 1 of 2, first of 11 ops (H; trn2 M)",
            [(1024, 257.65)],
            lambda size, us: "runs beside stream 0's all-gathers on the same ranks; the model projects one "
                             "collective alone", note=", stream 1 of 2")
    + sweep("all-to-all-v", 2, 2, "fp32", "trn2", f"{R228}, one rank per instance, uneven send counts "
            "(H; instance not named, trn2 L)", [(1048608, 955.05)],
            lambda size, us: "costmodel.collective takes a group size, not how its ranks spread over "
                             "instances: 2 ranks are projected inside one instance (NeuronLink). Over EFA (15 us "
                             "a step, the rank's 6.25 GB/s) the model would say ~0.2 ms, still 5x under the "
                             "published 0.96 ms; all-to-all-v's per-peer metadata is not modelled")
)
