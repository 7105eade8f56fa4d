"""AWS's nccom-test outputs: all-reduce, all-gather, permute, all-gather-v and all-to-all-v size sweeps, as
published in the NCCOM-TEST User Guide (aws-neuron-sdk ``tools/neuron-sys-tools/nccom-test.rst``).

nccom-test generates and runs NEFFs of collective instructions through the Neuron runtime, with no framework;
its ``time`` column is the P50 (the page's outputs up to 2.26) or the mean (from 2.28) of the durations of one
collective operation on the device (DEVICE). ``size(B)`` is
the collective's buffer: all-reduce's input and output, all-gather's output (each rank contributes
size/ranks), reduce-scatter's input. Each row is projected with ``costmodel.collective`` on the published
size and ranks, one rank's bytes read and written as the runtime records them, on the runtime of the release
that added the output to the page (``Target.at_release``: docs/cost_model.md, "Collectives by runtime
release"): the newest runtime it can have run on. (The page warns that its "Performance data ... should not be
considered up-to-date": an output may be older than the release that added it. The changes the model applies
do not depend on that: the 2.10 outputs ran before 2.11 and 2.16 either way, and no later output spans instances
but the all-to-all-v, whose release is after 2.16 either way.)

One sweep is not AWS's page: aws/aws-k8s-tester's multi-node nccom-test (the same 2 x 32 trn1 all-reduce sweep
as the page's, ``-r 64 -N 2 -b 8 -e 2G -f 2 -n 5 -w 5 -d fp32 allr``), whose output an AWS engineer posted on
pull request #559 (2025-01-13) when moving the test to Neuron 2.21 (aws-neuronx-runtime-lib 2.23.110,
aws-neuronx-collectives 2.23.133: the Dockerfile of that commit, e022ac30) on two trn1.32xlarge.

Where each output comes from (the commit that added it to the page; the time column is AWS's: H). The page
names no instance type: the outputs added in 2023 (Neuron 2.10, when nccom-test supported trn1 and inf2 only,
with 32 ranks per instance and 2 instances of 32 ranks) are trn1's (M); the ones added from 2025 on name
none and are taken as trn2's, the generation the runtime's notes of those releases are about (L), except
the 16-rank sweep whose KangaRing algorithm is Trn2's (M).
"""
from __future__ import annotations

import inspect
from typing import Optional

from torchneuron_ext import costmodel

from . import DEVICE, Row

PAGE = "aws-neuron-sdk tools/neuron-sys-tools/nccom-test.rst"
R210 = f"{PAGE} @f5d2d79a (Neuron 2.10, 2023-05)"
R224 = f"{PAGE} @90a7fe4b (Neuron 2.24, 2025-06)"
R226 = f"{PAGE} @8fb0d7c8 (2025-11)"
R228 = f"{PAGE} @86a92868 (Neuron 2.28, 2026-02)"
R232 = f"{PAGE} @a3247f5b (Neuron 2.32, 2026-08)"
K8S_TESTER = ("aws/aws-k8s-tester pull request #559 (2025-01-13), multi-node nccom-test on 2 trn1.32xlarge, "
              "Neuron 2.21 (runtime 2.23.110, collectives 2.23.133; Dockerfile @e022ac30)")

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


def _projector(op: str, size: int, ranks: int, instances: int, target: str, release: str,
               payload: Optional[tuple[int, int]] = None):
    name, rw = OPS[op]
    read, written = payload if payload is not None else rw(size, ranks)

    def project() -> float:
        t = costmodel.get_target(target)
        # The runtime's release is a parameter of the model from issue 30's second revision on, and how a
        # group spreads over instances (nccom-test's -N) from its third; the "before" column was projected
        # by a package without them (each row at the newest runtime, its ranks packed into instances).
        if hasattr(t, "at_release"):
            t = t.at_release(release)
        if "instances" in inspect.signature(costmodel.collective).parameters:
            return costmodel.collective(name, read, written, ranks, t, instances=instances).duration_s
        return costmodel.collective(name, read, written, ranks, t).duration_s
    return project


def sweep(op: str, ranks: int, instances: int, dtype: str, target: str, source: str,
          points: list[tuple[int, float]], reason=lambda size, us: "", note: str = "",
          release: str = "", former: str = "", payload: Optional[tuple[int, int]] = None) -> list[Row]:
    """One published nccom-test table: (size in bytes, time in us) per line, over `ranks` spread evenly over
    `instances` (its -N), run by the runtime of Neuron `release` (the one that added it to the page).
    `former`: the kernel the rows were listed under before a correction (their "before" projection is found
    under it). `payload`: one rank's (bytes read, bytes written) where they are not the size's (OPS)."""
    where = f"{ranks} ranks, {'1 instance' if instances == 1 else f'{instances} instances'}"
    kernel = f"nccom-test {op}, {where}{note}"
    return [Row("collectives", kernel, _human(size), dtype, target, us * 1e-6, DEVICE, source,
                _projector(op, size, ranks, instances, target, release, payload), reason(size, us),
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
# Neuron 2.21 (aws-k8s-tester #559): the same 2 x 32 sweep, 5 operations per size. The posted output is cut after
# 256 B; its first four sizes (8-64 B: 993.51, 975.01, 757.09, 291.54 us) fall 3.4x over 56 bytes as the run starts
# (5 warm-up operations a size) and are left out; from 128 B the sweep settles where the page's 2.10 sweep is flat.
K8S_2X32_221 = [(128, 55.89), (256, 58.35)]
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

NEWER_FLOOR = ("trn2's single-stream small all-gathers of 2.24-2.32 (6-16 us) are 6-16x under the floor (99.6 us), "
               "which is read off 2.32's 16-rank all-reduce run beside a second stream (101 us; that run's other "
               "stream took 2.5x as long); 2.28's single-stream 16-rank all-reduce took 300 us. The all-gathers fit "
               "the intranode page's 'latency term of 10^0 to 10^1 us', the all-reduces are 10-30x it, and no "
               "runtime note or page gives a fixed cost by operation (with a reduction or without) or group. Not "
               "the statistic (P50 until 2.26, the mean from 2.28: 2.28's all-gather has p25-p99 of 10-12 us) nor "
               "the size (an all-gather's is its output: --show-input-output-size); nccom-test also runs on trn3 "
               "from 2.27, so the outputs added from 2.28 on may be trn3's")
TRN1_2X32_MID = ("the 2.10 runtime's 2-instance sweep takes 520 us at 8-64 B, 709 us at 256 B (64 fp32, the first "
                 "size at which every one of the 64 ranks' reduce-scatter chunks holds an element) and climbs to 1315 "
                 "us by 64 KiB, flat to 2 MiB: 0.1 GB/s for the added bytes, which no link gives, and not flat as a "
                 "latency term is. The model (Ring stages before 2.11, the collectives barrier of 500 us before 2.16 "
                 "in place of the floor) is 623 us to 0.83 ms there; no document gives the climb")


def _trn1_32_allg_reason(size: int, us: float) -> str:
    if size < 512 << 10:
        return ""
    return ("at 512 KiB the 2.10 Ring takes 179 us, 29 us over its own 64 KiB point: the added bytes (31/32 x 448 "
            "KiB) would move at 15 GB/s, under a trn1 NeuronLink port (48 GB/s: 10.6 us at 512 KiB) and near one "
            "DMA engine (17 GB/s), but no document says a Ring step is one engine's transfer")


def _trn1_2x32_reason(size: int, us: float) -> str:
    return TRN1_2X32_MID if 4 << 10 < size < 8 << 20 else ""


def _r228_16_reason(size: int, us: float) -> str:
    if size >= 512 << 20:
        return ""
    return ("2.28's single-stream 16-rank all-reduce: 300 us at 4 B-8 KiB (Mesh), 3x 2.32's 16-rank all-reduce beside "
            "a second stream (101 us, where the floor is read) and 30x 2.28's own 8-rank all-gather (10 us, p99 12 "
            "us); its KangaRing adds 2.2 ms at 32 MiB that 512 MiB does not (104 GB/s busbw there, near the model's "
            "128 GB/s port), so no latency or bandwidth term fits both. No note of 2.29-2.32 reports an all-reduce cut, and "
            "the page does not say whether it ran on trn2 or trn3 (nccom-test runs on trn3 from 2.27)")


# nccom-test's all-to-all-v example (Neuron 2.28): -r 2 -N 2, one rank per instance, and one metadata entry for both
# ranks: send_counts [512, 1024] fp32 to ranks 0 and 1. Its size(B), 1048608, is the 1 MiB buffer plus the metadata
# (8 int32 counts and displacements: 32 B); the data a rank sends is the counts': 2 KiB to rank 0 and 4 KiB to rank
# 1. The projection moves the larger, 4 KiB, to the peer: an all-to-all of 8 KiB (each rank sends (N-1)/N of it).
ALLTOALLV_SEND_COUNTS = (512, 1024)
ALLTOALLV_PAYLOAD = (4 * sum(ALLTOALLV_SEND_COUNTS), 2 * 4 * max(ALLTOALLV_SEND_COUNTS))


ROWS = (
    sweep("all-reduce", 2, 1, "uint8", "trn1", f"{R210}, first example (H; trn1 M)", [(33554432, 768)], release="2.10")
    + sweep("all-reduce", 2, 1, "fp32", "trn1", f"{R210} (H; trn1 M)", TRN1_2RANK, release="2.10")
    + sweep("all-gather", 32, 1, "fp32", "trn1", f"{R210} (H; trn1 M)", TRN1_32RANK_ALLG,
            _trn1_32_allg_reason, release="2.10")
    + sweep("all-reduce", 64, 2, "fp32", "trn1", f"{R210} (H; trn1 M: 2 instances of 32 ranks)", TRN1_2X32,
            _trn1_2x32_reason, release="2.10")
    + sweep("all-reduce", 64, 2, "fp32", "trn1", f"{K8S_TESTER} (H; first 4 sizes left out: warm-up)", K8S_2X32_221,
            release="2.21", note=", Neuron 2.21")
    + sweep("all-gather", 32, 1, "fp32", "trn2", f"{R224} (H; instance not named, trn2 L)", R224_32RANK_ALLG,
            lambda size, us: NEWER_FLOOR, release="2.24")
    + sweep("permute", 8, 1, "uint8", "trn2", f"{R226}, pairs 0<->1, 2<->3, 4-7 to themselves "
            "(H; instance not named, trn2 L)", [(33554432, 894.24)],
            lambda size, us: "a pairwise exchange at 37.5 GB/s, under a third of the trn2 NeuronLink port rate the "
                             "model uses (128 GB/s) and under trn1's port rate (48 GB/s): if the instance was a "
                             "trn1, the model's 0.76 ms would be 0.85x; the page names none. On either, each pair "
                             "is two ranks of one chip (2 a trn1 chip, 4 a trn2 chip at LNC=2): no NeuronLink "
                             "carries it, and no page gives the intra-chip path's rate",
            release="2.26")
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
    + sweep("all-to-all-v", 2, 2, "fp32", "trn2", f"{R228}, one rank per instance, send counts 512 and 1024 fp32 "
            "(H; instance not named, trn2 L)", [(1048608, 955.05)],
            lambda size, us: "one rank per instance (-N 2): the model's EFA stage, 15 us and 4 KiB at the rank's 6.25 "
                             "GB/s, with the floor 0.12 ms, 8x under the published 0.96 ms. The size column is the "
                             "1 MiB buffer and 32 B of metadata; the counts send 2 and 4 KiB. Before 2.32's runtime, "
                             "which added 'multi-device AllToAllV' and tiled it into channel-buffer-sized "
                             "iterations, nccom-test ran all-to-all-v across instances only; how, no page says",
            release="2.28", payload=ALLTOALLV_PAYLOAD)
)
