"""The bytes each generated kernel of a compiled graph actually moves, from Inductor's scheduler: a buffer
read through an indirect index (an embedding lookup fused into an add, a KV cache's new position written in
place) is charged the elements the kernel touches, not the whole buffer it is passed."""
from __future__ import annotations

from typing import Any, Optional, Sequence

from .. import _torch_internals

_torch_internals.require("P7")

from torch._inductor.codegen.cpp import CppScheduling  # noqa: E402

# Per buffer name: (bytes read, bytes written) by one kernel.
BufferBytes = dict[str, tuple[int, int]]


def kernel_buffer_bytes(nodes: Sequence[Any]) -> Optional[BufferBytes]:
    """What a kernel made of these scheduler nodes reads and writes of each buffer, as Inductor's
    `get_read_write_buffer_accesses` counts it: per access (a MemoryDep, or a StarDep on a whole buffer),
    the kernel's iterations (its loop ranges), bounded by the buffer's size, so a buffer read in full by a
    reduction is charged whole and one read through an indirect index the elements the kernel loads: the
    iterations, not the index, bound it (the index's values are data).

    None when a size is symbolic (dynamic shapes): the counts would hold for one size only."""
    from torch._inductor.virtualized import V

    reads: dict[str, int] = {}
    writes: dict[str, int] = {}
    for node in nodes:
        ranges = node.get_ranges() if hasattr(node, "get_ranges") else ((), ())
        if any(getattr(s, "free_symbols", None) for part in ranges for s in part):
            return None
        for include_reads, into in ((True, reads), (False, writes)):
            accesses = node.get_read_write_buffer_accesses(include_reads=include_reads,
                                                           include_writes=not include_reads)
            for name, nbytes in accesses.items():
                buf = V.graph.name_to_buffer.get(name) or V.graph.graph_inputs.get(name)
                if buf is not None and any(getattr(s, "free_symbols", None) for s in buf.get_size()):
                    return None
                # A kernel writing into an existing buffer (index_put_ on a graph input) writes a buffer
                # whose layout names the one it mutates: the kernel's argument is that one.
                mutated = _mutated_names(buf)
                for target in mutated or [name]:
                    into[target] = into.get(target, 0) + int(nbytes)
    return {name: (reads.get(name, 0), writes.get(name, 0)) for name in reads.keys() | writes.keys()}


def _mutated_names(buf: Any) -> list[str]:
    """The buffers a buffer writes into (its MutationLayout's target), none for a buffer of its own."""
    names = getattr(buf, "get_mutation_names", None)
    return list(names()) if names is not None else []


def _merge_inplaced(counted: BufferBytes, kernel_args: Any) -> BufferBytes:
    """A buffer the kernel writes in place of one it reads (Inductor's in-place reuse, an `in_out_ptr`) is one
    argument under the last of its names (KernelArgs.cpp_argdefs): its reads and writes are counted under the
    other names too."""
    merged = dict(counted)
    for inplaced in {id(b): b for b in getattr(kernel_args, "inplace_buffers", {}).values()}.values():
        names = [n for n in getattr(inplaced, "other_names", ()) if n in counted]
        if not names:
            continue
        for n in names:
            merged.pop(n, None)
        merged[inplaced.other_names[-1]] = (sum(counted[n][0] for n in names), sum(counted[n][1] for n in names))
    return merged


class NeuronCppScheduling(CppScheduling):
    """Inductor's C++ scheduling, which also hands the wrapper each kernel's bytes per buffer (kept by
    NeuronWrapperCodegen for the kernel's call)."""

    def define_kernel(self, src_code: str, nodes: Any, kernel_args: Any = None) -> str:
        from torch._inductor.virtualized import V

        kernel_name = super().define_kernel(src_code, nodes, kernel_args)
        keep = getattr(V.graph.wrapper_code, "keep_kernel_bytes", None)
        if keep is not None:
            try:
                counted = kernel_buffer_bytes(nodes)
                if counted is not None:
                    args = self.kernel_group.args if kernel_args is None else kernel_args
                    counted = _merge_inplaced(counted, args)
            except (AttributeError, KeyError, NotImplementedError, AssertionError):
                # Inductor's accounting has gaps (MultiOutput, templates): the call then counts whole arguments.
                counted = None
            keep(kernel_name, counted)
        return kernel_name
