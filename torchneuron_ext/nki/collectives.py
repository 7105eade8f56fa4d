"""``nki.collectives``: collective communication between ranks, run for real.

A rank is a logical core, as on the device: a launch (``kernel(...)``, ``kernel[2](...)``) is rank 0 alone,
and ``nki.launch_ranks(kernel[lnc], inputs)`` runs the kernel on ``len(inputs)`` ranks at once, each with
its own arguments. A ``ReplicaGroup`` lists disjoint groups of ranks; each rank takes part in the
collective of the group that holds it, and a group naming a rank that does not run is an error. Every rank
of a group must issue the collective; under LNC=2 each physical core issues its own, on its own data, and
meets the same-numbered core of the other ranks (nki/cores.py). The ranks exchange copies of their
sources and each writes its destinations. Each collective is counted in the launch's
instructions and timed by the ring formula of trainium/projection.py (docs/cost_model.md).
"""
from __future__ import annotations

import dataclasses
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from . import float_bits
from ._lang import NKIObject
from .engines import collective as _cc
from .errors import NKIUnsupportedError, fail
from .isa.registers import VirtualRegister
from .tensor import NKITensor

__all__ = ["ReplicaGroup", "all_reduce", "all_gather", "all_gather_v", "reduce_scatter", "all_to_all",
           "all_to_all_v", "collective_permute", "collective_permute_implicit",
           "collective_permute_implicit_reduce", "collective_permute_implicit_current_processing_rank_id",
           "rank_id"]


@dataclasses.dataclass
class ReplicaGroup(NKIObject):
    """Disjoint groups of ranks, e.g. ``ReplicaGroup([[0, 1]])``; a collective runs within each group."""
    replica_groups: List[List[int]]

    def __post_init__(self) -> None:
        try:
            groups = [[int(r) for r in g] for g in self.replica_groups]
        except TypeError:
            raise TypeError(f"ReplicaGroup takes a list of lists of ranks, e.g. [[0, 1]], got "
                            f"{self.replica_groups!r}") from None
        seen: set = set()
        for g in groups:
            if not g:
                raise ValueError(f"ReplicaGroup {self.replica_groups!r}: a group has no ranks")
            if seen & set(g) or len(set(g)) != len(g):
                raise ValueError(f"ReplicaGroup {self.replica_groups!r}: groups must not overlap (a rank is in "
                                 f"one group, once)")
            seen |= set(g)
        self.replica_groups = groups

    def __hash__(self) -> int:
        # Kernels take it as an argument, and non-tensor arguments are compile-time constants: hashable.
        return hash(tuple(tuple(g) for g in self.replica_groups))

    def group_of(self, api: str) -> Tuple[int, ...]:
        """The group the running rank belongs to; every rank named must be a core of the launch."""
        for g in self.replica_groups:
            _cc.check_ranks(api, g, f"replica group {g}")
        me = _cc.rank()
        for g in self.replica_groups:
            if me in g:
                return tuple(g)
        fail("err_invalid_rank", f"{api}: rank {me} is in none of the replica groups {self.replica_groups}")


def _group(api: str, replica_group: Any) -> Tuple[int, ...]:
    if not isinstance(replica_group, ReplicaGroup):
        raise TypeError(f"{api}: replica_group must be an nki.collectives.ReplicaGroup, got "
                        f"{type(replica_group).__name__}")
    return replica_group.group_of(api)


def _lists(api: str, srcs: Any, dsts: Any, hbm_only: bool = False, single: bool = False) -> bool:
    for arg, v in (("srcs", srcs), ("dsts", dsts)):
        if not isinstance(v, (list, tuple)) or not v:
            raise TypeError(f"{api}: {arg} must be a non-empty list of tensors, got {v!r}")
    if len(srcs) != len(dsts):
        fail("err_shape_mismatch", f"{api}: {len(srcs)} srcs but {len(dsts)} dsts")
    if single and len(srcs) != 1:
        fail("err_unsupported_collective", f"{api}: srcs and dsts must hold exactly one tensor each (coalesced "
                                           f"collectives are not supported here by AWS), got {len(srcs)}")
    hbm = _cc.same_memory(api, list(srcs) + list(dsts), allow_sbuf=not hbm_only)
    if not hbm and len(srcs) > 1:
        fail("err_unsupported_collective", f"{api}: coalesced collectives (several tensors) need HBM tensors, "
                                           f"got {len(srcs)} SBUF tensors")
    return hbm


def _priority(api: str, priority: Optional[int]) -> None:
    # A DMA quality-of-service level orders transfers against other traffic; it does not change the data.
    if priority is not None and (isinstance(priority, bool) or priority not in (0, 1, 2, 3)):
        raise ValueError(f"{api}: priority must be 0, 1, 2 or 3, got {priority!r}")


def _meet(api: str, key: Any, group: Tuple[int, ...], value: Any, detail: str = "") -> dict:
    return _cc.exchange_ranks((api, key, group), group, value, f"{api}({detail}replica group {list(group)})")


def _dim(api: str, collective_dim: int, hbm: bool, allowed_sbuf: Sequence[int] = (0, 1)) -> int:
    allowed = (0,) if hbm else tuple(allowed_sbuf)
    if collective_dim not in allowed:
        fail("err_unsupported_collective", f"{api}: collective_dim must be {' or '.join(map(str, allowed))} for "
                                           f"{'HBM' if hbm else 'SBUF'} tensors, got {collective_dim!r}")
    return int(collective_dim)


def _fit(api: str, values: np.ndarray, dst: NKITensor, what: str) -> np.ndarray:
    """A result into its destination: the same shape, or the same elements in the same order (a
    destination viewed with another shape, as kernels reshape gather buffers)."""
    if tuple(values.shape) == tuple(dst.shape):
        return values
    if values.size != int(np.prod(dst.shape)):
        fail("err_shape_mismatch", f"{api}: {what} has shape {tuple(values.shape)} ({values.size} elements) but "
                                   f"dst has shape {tuple(dst.shape)}")
    return np.ascontiguousarray(values).reshape(dst.shape)


def all_reduce(srcs: List[NKITensor], dsts: List[NKITensor], replica_group: ReplicaGroup, op: Any,
               priority: Optional[int] = None, name: Optional[str] = None) -> None:
    """Every rank's dsts[i] = op over the group's srcs[i], folded in rank order."""
    api = "ncc.all_reduce"
    hbm = _lists(api, srcs, dsts)
    fn = _cc.reduce_fn(api, op)
    _priority(api, priority)
    group = _group(api, replica_group)
    got = _meet(api, None, group, [_cc.snapshot(s) for s in srcs])
    for i, dst in enumerate(dsts):
        parts = [got[r][i] for r in group]
        if any(p.shape != parts[0].shape for p in parts):
            fail("err_shape_mismatch", f"{api}: srcs[{i}] has shapes {[p.shape for p in parts]} on ranks {list(group)}")
        _cc.write(dst, _fit(api, _cc.reduce_values(fn, parts, dst.dtype), dst, f"the reduction of srcs[{i}]"), api)
    _cc.charge("all_reduce", max(sum(map(_cc.nbytes, srcs)), sum(map(_cc.nbytes, dsts))), len(group), hbm)


def all_gather(srcs: List[NKITensor], dsts: List[NKITensor], replica_group: ReplicaGroup, collective_dim: int,
               priority: Optional[int] = None, name: Optional[str] = None) -> None:
    """Every rank's dsts[i] = the group's srcs[i] concatenated in rank order along collective_dim."""
    api = "ncc.all_gather"
    hbm = _lists(api, srcs, dsts)
    dim = _dim(api, collective_dim, hbm)
    _priority(api, priority)
    group = _group(api, replica_group)
    got = _meet(api, dim, group, [_cc.snapshot(s) for s in srcs])
    for i, dst in enumerate(dsts):
        parts = [got[r][i] for r in group]
        try:
            gathered = np.concatenate(parts, axis=dim)
        except ValueError:
            fail("err_shape_mismatch", f"{api}: srcs[{i}] of shapes {[p.shape for p in parts]} on ranks "
                                       f"{list(group)} cannot be concatenated along dimension {dim}")
        _cc.write(dst, _fit(api, gathered, dst, f"the gather of srcs[{i}]"), api)
    _cc.charge("all_gather", sum(map(_cc.nbytes, dsts)), len(group), hbm)


def reduce_scatter(srcs: List[NKITensor], dsts: List[NKITensor], replica_group: ReplicaGroup,
                   collective_dim: int, op: Any, priority: Optional[int] = None,
                   name: Optional[str] = None) -> None:
    """The group's srcs[i] reduced, split in group-size chunks along dimension 0: the k-th rank of the group
    gets chunk k."""
    api = "ncc.reduce_scatter"
    hbm = _lists(api, srcs, dsts)
    dim = _dim(api, collective_dim, hbm, allowed_sbuf=(0,))
    fn = _cc.reduce_fn(api, op)
    _priority(api, priority)
    group = _group(api, replica_group)
    n, pos = len(group), group.index(_cc.rank())
    got = _meet(api, dim, group, [_cc.snapshot(s) for s in srcs])
    for i, dst in enumerate(dsts):
        parts = [got[r][i] for r in group]
        if parts[0].shape[dim] % n:
            fail("err_shape_mismatch", f"{api}: srcs[{i}] has {parts[0].shape[dim]} rows along dimension {dim}, "
                                       f"not a multiple of the group's {n} ranks")
        reduced = _cc.reduce_values(fn, parts, dst.dtype)
        chunk = reduced.shape[dim] // n
        _cc.write(dst, _fit(api, reduced[pos * chunk:(pos + 1) * chunk], dst, f"chunk {pos} of srcs[{i}]"), api)
    _cc.charge("reduce_scatter", sum(map(_cc.nbytes, srcs)), n, hbm)


def all_to_all(srcs: List[NKITensor], dsts: List[NKITensor], replica_group: ReplicaGroup, collective_dim: int,
               priority: Optional[int] = None, name: Optional[str] = None) -> None:
    """srcs[i] split in group-size chunks along dimension 0; chunk k goes to the k-th rank of the group, which
    concatenates what it receives in rank order."""
    api = "ncc.all_to_all"
    hbm = _lists(api, srcs, dsts, hbm_only=True)
    dim = _dim(api, collective_dim, hbm)
    _priority(api, priority)
    group = _group(api, replica_group)
    n, pos = len(group), group.index(_cc.rank())
    got = _meet(api, dim, group, [_cc.snapshot(s) for s in srcs])
    for i, dst in enumerate(dsts):
        chunks = []
        for r in group:
            part = got[r][i]
            if part.shape[0] % n:
                fail("err_shape_mismatch", f"{api}: srcs[{i}] of rank {r} has {part.shape[0]} rows, not a multiple "
                                           f"of the group's {n} ranks")
            size = part.shape[0] // n
            chunks.append(part[pos * size:(pos + 1) * size])
        _cc.write(dst, _fit(api, np.concatenate(chunks, axis=0), dst, f"the exchange of srcs[{i}]"), api)
    _cc.charge("all_to_all", sum(map(_cc.nbytes, srcs)), n, hbm)


def _v_common(api: str, srcs: Any, dsts: Any, has_rdispls: bool) -> None:
    _lists(api, srcs, dsts, hbm_only=True, single=True)
    if has_rdispls:
        raise NKIUnsupportedError(f"{api}(has_rdispls=True) is not modelled by the simulator (AWS supports it on "
                                  f"NeuronSwitch instances only); leave it False")


def _write_flat(api: str, dst: NKITensor, chunks: "list[tuple[int, np.ndarray]]") -> None:
    """Place each (element offset, values) chunk into ``dst`` seen as a flat buffer."""
    out = np.array(dst.read(), copy=True).reshape(-1)
    for offset, values in chunks:
        if offset < 0 or offset + values.size > out.size:
            fail("err_out_of_bound_access", f"{api}: a chunk of {values.size} elements at element {offset} does not "
                                            f"fit dst's {out.size} elements")
        if values.dtype != out.dtype:
            values = float_bits.from_float32(values, out.dtype)  # astype, vectorised into bf16 and 8-bit floats
        out[offset:offset + values.size] = values
    _cc.write(dst, out.reshape(dst.shape), api)


def _recv_counts(meta: NKITensor, table: np.ndarray, counts: Sequence[int]) -> None:
    """Row 2 of the metadata: what each rank of the group sent here (an output unless recv_counts_known)."""
    table = table.copy()
    table[2, :] = counts
    _cc.write(meta, table.astype(np.uint32).reshape(meta.shape), "metadata_tensor")


def _chunk(api: str, src: np.ndarray, start: int, count: int, rank: int) -> np.ndarray:
    flat = _cc.flat(src)
    if start < 0 or count < 0 or start + count > flat.size:
        fail("err_out_of_bound_access", f"{api}: rank {rank} sends {count} elements from element {start} of a src "
                                        f"of {flat.size} elements")
    return flat[start:start + count]


def all_gather_v(srcs: List[NKITensor], dsts: List[NKITensor], replica_group: ReplicaGroup,
                 metadata_tensor: NKITensor, recv_counts_known: bool = False, has_rdispls: bool = False,
                 priority: Optional[int] = None, name: Optional[str] = None) -> None:
    """Each rank broadcasts src[send_displ : send_displ + send_count] (metadata rows 0 and 1, first column);
    the chunk of the group's k-th rank lands at dst element k * dst.size / group size."""
    api = "ncc.all_gather_v"
    _v_common(api, srcs, dsts, has_rdispls)
    _priority(api, priority)
    group = _group(api, replica_group)
    n = len(group)
    table, meta = _cc.metadata_rows(api, metadata_tensor, n, has_rdispls)
    src, dst = srcs[0], dsts[0]
    mine = _chunk(api, _cc.snapshot(src), int(table[1, 0]), int(table[0, 0]), _cc.rank())
    got = _meet(api, None, group, mine)
    slot = int(np.prod(dst.shape)) // n
    for k, r in enumerate(group):
        if got[r].size > slot:
            fail("err_out_of_bound_access", f"{api}: rank {r} sends {got[r].size} elements, more than the {slot} "
                                            f"of its slot in dst ({int(np.prod(dst.shape))} elements / {n} ranks)")
    _write_flat(api, dst, [(k * slot, got[r]) for k, r in enumerate(group)])
    if not recv_counts_known:
        _recv_counts(meta, table, [got[r].size for r in group])
    _cc.charge("all_gather_v", sum(got[r].size for r in group) * dst.itemsize, n, True)


def all_to_all_v(srcs: List[NKITensor], dsts: List[NKITensor], replica_group: ReplicaGroup,
                 metadata_tensor: NKITensor, recv_counts_known: bool = False, has_rdispls: bool = False,
                 priority: Optional[int] = None, name: Optional[str] = None) -> None:
    """Rank r of the group gets src[send_displs[r] : send_displs[r] + send_counts[r]] of every rank k
    (metadata rows 0 and 1 of rank k), at dst element k * dst.size / group size."""
    api = "ncc.all_to_all_v"
    _v_common(api, srcs, dsts, has_rdispls)
    _priority(api, priority)
    group = _group(api, replica_group)
    n, me = len(group), _cc.rank()
    table, meta = _cc.metadata_rows(api, metadata_tensor, n, has_rdispls)
    src, dst = srcs[0], dsts[0]
    values = _cc.snapshot(src)
    outgoing = [_chunk(api, values, int(table[1, k]), int(table[0, k]), me) for k in range(n)]
    got = _meet(api, None, group, outgoing)
    pos = group.index(me)
    incoming = [got[r][pos] for r in group]
    slot = int(np.prod(dst.shape)) // n
    for k, r in enumerate(group):
        if incoming[k].size > slot:
            fail("err_out_of_bound_access", f"{api}: rank {r} sends {incoming[k].size} elements to rank {me}, "
                                            f"more than the {slot} of its slot in dst")
    _write_flat(api, dst, [(k * slot, incoming[k]) for k in range(n)])
    if not recv_counts_known:
        _recv_counts(meta, table, [c.size for c in incoming])
    _cc.charge("all_to_all_v", max(sum(c.size for c in outgoing) * src.itemsize,
                                   sum(c.size for c in incoming) * dst.itemsize), n, True)


def collective_permute(srcs: List[NKITensor], dsts: List[NKITensor], source_target_pairs: List[Tuple[int, int]],
                       priority: Optional[int] = None, name: Optional[str] = None) -> None:
    """For each (source, target) pair, the target's dst receives the source's src; a rank that no pair
    targets keeps its dst."""
    api = "ncc.collective_permute"
    _lists(api, srcs, dsts, hbm_only=True, single=True)
    _priority(api, priority)
    try:
        pairs = tuple((int(s), int(t)) for s, t in source_target_pairs)
    except (TypeError, ValueError):
        raise TypeError(f"{api}: source_target_pairs must be a list of (source, target) ranks, got "
                        f"{source_target_pairs!r}") from None
    ranks = _cc.check_ranks(api, sorted({r for p in pairs for r in p}), "source_target_pairs")
    for side, idx in (("source", 0), ("target", 1)):
        named = [p[idx] for p in pairs]
        if len(set(named)) != len(named):
            fail("err_invalid_rank", f"{api}: a rank is the {side} of more than one pair in {list(pairs)}")
    me = _cc.rank()
    got = _cc.exchange_ranks((api, pairs), ranks, _cc.snapshot(srcs[0]), f"{api}(source_target_pairs={list(pairs)})")
    sources = [s for s, t in pairs if t == me]
    if sources:
        _cc.write(dsts[0], _fit(api, got[sources[0]], dsts[0], f"rank {sources[0]}'s src"), api)
    if any(s == me for s, _ in pairs) or sources:
        _cc.charge("collective_permute", max(_cc.nbytes(srcs[0]), _cc.nbytes(dsts[0])), 2, True)


def _channels(api: str, channel_ids: Sequence[int], *lists: Any) -> int:
    ids = list(channel_ids)
    if ids != list(range(len(ids))) or not ids:
        fail("err_unsupported_collective", f"{api}: channel_ids must be consecutive integers from 0, got {ids}")
    if len(ids) > 4:
        fail("err_unsupported_collective", f"{api}: at most 4 channels, got {len(ids)}")
    for lst in lists:
        if not isinstance(lst, (list, tuple)) or len(lst) != len(ids):
            fail("err_shape_mismatch", f"{api}: one tensor list per channel ({len(ids)}) is needed, got {lst!r}")
        for inner in lst:
            if not isinstance(inner, (list, tuple)) or len(inner) != 1:
                fail("err_unsupported_collective", f"{api}: each channel's list holds exactly one tensor, got "
                                                   f"{inner!r}")
    return len(ids)


def _ring(api: str, replica_group: Any, sends: "list[np.ndarray]", dsts_by_channel: Any, key: Any) -> int:
    group = _group(api, replica_group)
    n, me = len(group), _cc.rank()
    pos = group.index(me)
    got = _meet(api, key, group, sends, "ring, ")
    pred = group[(pos - 1) % n]
    for c, dst in enumerate(d[0] for d in dsts_by_channel):
        _cc.write(dst, _fit(api, got[pred][c], dst, f"rank {pred}'s channel {c}"), api)
    return n


def collective_permute_implicit(srcs_by_channel: List[List[NKITensor]], dsts_by_channel: List[List[NKITensor]],
                                replica_group: ReplicaGroup, channel_ids: List[int] = [0],  # noqa: B006 (AWS's)
                                priority: Optional[int] = None, name: Optional[str] = None) -> None:
    """Each rank sends each channel's src to its successor in its group's ring and receives its
    predecessor's into the channel's dst."""
    api = "ncc.collective_permute_implicit"
    _channels(api, channel_ids, srcs_by_channel, dsts_by_channel)
    for s, d in zip(srcs_by_channel, dsts_by_channel):
        _lists(api, s, d)
    _priority(api, priority)
    sends = [_cc.snapshot(s[0]) for s in srcs_by_channel]
    n = _ring(api, replica_group, sends, dsts_by_channel, tuple(channel_ids))
    hbm = srcs_by_channel[0][0].buffer.is_hbm
    _cc.charge("collective_permute_implicit", sum(v.nbytes for v in sends), n, hbm)


def collective_permute_implicit_reduce(srcs0_by_channel: List[List[NKITensor]],
                                       srcs1_by_channel: List[List[NKITensor]],
                                       dsts_by_channel: List[List[NKITensor]], replica_group: ReplicaGroup, op: Any,
                                       channel_ids: List[int] = [0],  # noqa: B006 (AWS's signature)
                                       priority: Optional[int] = None, name: Optional[str] = None) -> None:
    """Each rank sends op(srcs0, srcs1) of each channel to its ring successor and receives its
    predecessor's into the channel's dst."""
    api = "ncc.collective_permute_implicit_reduce"
    _channels(api, channel_ids, srcs0_by_channel, srcs1_by_channel, dsts_by_channel)
    fn = _cc.reduce_fn(api, op)
    for a, b, d in zip(srcs0_by_channel, srcs1_by_channel, dsts_by_channel):
        _lists(api, list(a) + list(b), list(d) * 2)
    _priority(api, priority)
    sends = []
    for a, b, d in zip(srcs0_by_channel, srcs1_by_channel, dsts_by_channel):
        x, y = _cc.snapshot(a[0]), _cc.snapshot(b[0])
        if x.shape != y.shape:
            fail("err_shape_mismatch", f"{api}: srcs0 {x.shape} and srcs1 {y.shape} of a channel differ in shape")
        sends.append(_cc.reduce_values(fn, [x, y], d[0].dtype))
    n = _ring(api, replica_group, sends, dsts_by_channel, tuple(channel_ids))
    hbm = srcs0_by_channel[0][0].buffer.is_hbm
    _cc.charge("collective_permute_implicit_reduce", sum(v.size for v in sends) * dsts_by_channel[0][0].itemsize,
               n, hbm)


def collective_permute_implicit_current_processing_rank_id(iteration_id: int, replica_group: ReplicaGroup,
                                                            channel_id: int = 0, name: Optional[str] = None
                                                            ) -> VirtualRegister:
    """The rank whose data this rank holds after ``iteration_id`` ring steps: its own at 0, then its
    predecessors' in turn. A register, as AWS documents: a dynamic offset (``.ap(scalar_offset=)``), not a
    Python integer."""
    api = "ncc.collective_permute_implicit_current_processing_rank_id"
    group = _group(api, replica_group)
    if not 0 <= int(channel_id) < 4:
        fail("err_unsupported_collective", f"{api}: channel_id must be 0..3, got {channel_id!r}")
    pos = group.index(_cc.rank())
    return VirtualRegister(group[(pos - int(iteration_id)) % len(group)])


def rank_id(name: Optional[str] = None) -> VirtualRegister:
    """This rank's id: which of the ranks running the kernel this one is (0 for a single launch). On the device
    the id is only known at run time, so it is a register (AWS's NKI Library uses it as ``scalar_offset=`` and
    notes that the compiler refuses arithmetic on it), not a Python integer."""
    return VirtualRegister(_cc.rank())
