"""AWS's nccom-test outputs: all-reduce, all-gather, permute, all-gather-v and all-to-all-v size sweeps, as
published in the NCCOM-TEST User Guide (aws-neuron-sdk ``tools/neuron-sys-tools/nccom-test.rst``).

nccom-test generates and runs NEFFs of collective instructions through the Neuron runtime, with no framework;
its ``time`` column is the mean duration of one collective operation on the device (DEVICE). ``size(B)`` is
the collective's buffer: all-reduce's input and output, all-gather's output (each rank contributes
size/ranks), reduce-scatter's input. Each row is projected with ``costmodel.collective`` on the published
size and ranks, one rank's bytes read and written as the runtime records them, on the runtime of the release
that added the output to the page (``Target.at_release``: docs/cost_model.md, "Collectives by runtime
release"): the newest runtime it can have run on. (The page warns that its "Performance data ... should not be
considered up-to-date": an output may be older than the release that added it. The changes the model applies
do not depend on that: the 2.10 outputs ran before 2.11 either way, and no later output is a 2 x 32 group.)

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


def _projector(op: str, size: int, ranks: int, target: str, release: str):
    name, rw = OPS[op]
    read, written = rw(size, ranks)

    def project() -> float:
        t = costmodel.get_target(target)
        # The runtime's release is a parameter of the model from issue 30's second revision on; the
        # "before" column was projected by a package without it (each row at the newest runtime).
        if hasattr(t, "at_release"):
            t = t.at_release(release)
        return costmodel.collective(name, read, written, ranks, t).duration_s
    return project


def sweep(op: str, ranks: int, instances: int, dtype: str, target: str, source: str,
          points: list[tuple[int, float]], reason=lambda size, us: "", note: str = "",
          release: str = "", former: str = "") -> list[Row]:
    """One published nccom-test table: (size in bytes, time in us) per line, run by the runtime of Neuron
    `release` (the one that added it to the page). `former`: the kernel the rows were listed under before a
    correction (their "before" projection is found under it)."""
    where = f"{ranks} ranks, {'1 instance' if instances == 1 else f'{instances} instances'}"
    kernel = f"nccom-test {op}, {where}{note}"
    return [Row("collectives", kernel, _human(size), dtype, target, us * 1e-6, DEVICE, source,
                _projector(op, size, ranks, target, release), reason(size, us),
                former_key=f"collectives | {former} | {_human(size)} | {dtype} | {target}"
                if former else "")
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
# Neuron 2.32: stream 0 of a two-stream run (--streams-json): the command line says allg -r 64, but
# streams_example.json overrides stream 0's operation with "all_reduce" (bf16) over stream_0_rg.json's four
# replica groups of 16 ranks; stream 1 runs the 64-rank fp32 all-gather of 1 KiB (2 ops per iteration) beside it.
R232_16RANK_ALLR = [(1024, 101.14), (2048, 101.93), (4096, 101.45), (8192, 101.84), (16384, 102.21),
                    (32768, 102.36), (65536, 103.28), (131072, 105.03), (262144, 107.37), (524288, 110.07),
                    (1048576, 117.67)]

NEWER_FLOOR = ("trn2's small all-gathers of 2.24-2.32 (6-16 us) are 6-16x under the floor read off 2.32's "
               "16-rank all-reduce (101 us) and 2.28's 16-rank all-reduce took 300 us: on one generation, all-gathers "
               "of 4-32 ranks cost 6-16 us and all-reduces of 16 ranks 100-300 us, and no release note or runtime "
               "page gives a fixed cost by operation or group; the intranode page's 'latency term of 10^0 to "
               "10^1 us' fits the all-gathers, the LLM rows' all-reduces (47-83 us each) fit the floor")
TRN1_2X32_MID = ("the 2.10 runtime's 2-instance sweep steps up from 520 us (8-128 B) to 840 us at 1 KiB and 1315 us "
                 "from 64 KiB to 2 MiB; the model (Ring stages before 2.11, the 2.24 note's 65% latency cut undone) "
                 "is flat at 513 us there: the 65% is an average over sizes the note does not give, and no "
                 "document gives the steps")


def _trn1_32_allg_reason(size: int, us: float) -> str:
    if size < 512 << 10:
        return ""
    return ("at 512 KiB the 2.10 Ring takes 179 us, 65 us over the 2-rank floor and 31 1.5 us hops: the bytes "
            "(31/32 x 512 KiB at 48 GB/s, 10.6 us) do not explain the rest")


def _trn1_2x32_reason(size: int, us: float) -> str:
    return TRN1_2X32_MID if 256 < size < 32 << 20 else ""


def _r228_16_reason(size: int, us: float) -> str:
    if size >= 512 << 20:
        return ""
    return ("2.28's 16-rank all-reduce took 300 us at small sizes (mesh), 3x 2.32's 16-rank all-reduce (101 us, "
            "where the floor is read) and 30x 2.28's own 8-rank all-gather; no release note of 2.29-2.32 reports a "
            "cut in all-reduce latency, so one of the two runs is not what the model can be fitted to")


ROWS = (
    sweep("all-reduce", 2, 1, "uint8", "trn1", f"{R210}, first example (H; trn1 M)", [(33554432, 768)], release="2.10")
    + sweep("all-reduce", 2, 1, "fp32", "trn1", f"{R210} (H; trn1 M)", TRN1_2RANK, release="2.10")
    + sweep("all-gather", 32, 1, "fp32", "trn1", f"{R210} (H; trn1 M)", TRN1_32RANK_ALLG,
            _trn1_32_allg_reason, release="2.10")
    + sweep("all-reduce", 64, 2, "fp32", "trn1", f"{R210} (H; trn1 M: 2 instances of 32 ranks)", TRN1_2X32,
            _trn1_2x32_reason, release="2.10")
    + sweep("all-gather", 32, 1, "fp32", "trn2", f"{R224} (H; instance not named, trn2 L)", R224_32RANK_ALLG,
            lambda size, us: NEWER_FLOOR, release="2.24")
    + sweep("permute", 8, 1, "uint8", "trn2", f"{R226}, pairs 0<->1, 2<->3, 4-7 to themselves "
            "(H; instance not named, trn2 L)", [(33554432, 894.24)],
            lambda size, us: "a pairwise exchange at 40 GB/s, a third of the trn2 NeuronLink port rate the "
                             "model uses (128 GB/s) and under trn1's port rate (48 GB/s): if the instance was a "
                             "trn1, the model's 0.76 ms would be 0.85x; the page names none", release="2.26")
    + sweep("all-gather", 8, 1, "fp32", "trn2", f"{R228}, --stats mean (H; instance not named, trn2 L)",
            R228_8RANK_ALLG, lambda size, us: NEWER_FLOOR, release="2.28")
    + sweep("all-reduce", 16, 1, "fp32", "trn2", f"{R228}, --show-algorithm (H; trn2 M: KangaRing)",
            R228_16RANK_ALLR, _r228_16_reason, release="2.28")
    + sweep("all-gather-v", 4, 1, "fp16", "trn2", f"{R232} (H; instance not named, trn2 L)", [(2048, 16.28)],
            lambda size, us: NEWER_FLOOR, release="2.32")
    + sweep("all-reduce", 16, 1, "bf16", "trn2", f"{R232}, stream 0 of 2: 4 replica groups of 16 ranks "
            "(stream_0_rg.json) beside stream 1's 64-rank all-gathers (H; trn2 M: 64 ranks in one instance)",
            R232_16RANK_ALLR, note=", 4 groups, stream 0 of 2", release="2.32",
            former="nccom-test all-gather, 64 ranks, 1 instance, stream 0 of 2")
    + sweep("all-gather", 64, 1, "fp32", "trn2", f"{R232}, stream 1 of 2, first of 11 ops (H; trn2 M)",
            [(1024, 257.65)],
            lambda size, us: "runs beside stream 0's all-reduces on the same ranks (2.5x the 101 us of stream 0); "
                             "the model projects one collective alone", note=", stream 1 of 2", release="2.32")
    + sweep("all-to-all-v", 2, 2, "fp32", "trn2", f"{R228}, one rank per instance, uneven send counts "
            "(H; instance not named, trn2 L)", [(1048608, 955.05)],
            lambda size, us: "costmodel.collective takes a group size, not how its ranks spread over "
                             "instances: 2 ranks are projected inside one instance (NeuronLink). Over EFA (15 us "
                             "a step, the rank's 6.25 GB/s) the model would say ~0.2 ms, still 5x under the "
                             "published 0.96 ms; all-to-all-v's per-peer metadata is not modelled",
            release="2.28")
)
