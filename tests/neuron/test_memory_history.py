"""torch.neuron.memory._record_memory_history / _snapshot / _dump_snapshot, as torch.cuda.memory's: events with
their stacks, the allocator's blocks, out-of-memory events, and snapshots that PyTorch's visualizer reads."""
import pickle

import pytest
import torch
from torch.cuda import _memory_viz

import torchneuron_ext  # noqa: F401

memory = torch.neuron.memory


@pytest.fixture
def recording():
    memory._record_memory_history(max_entries=100_000, clear_history=True)
    yield
    memory._record_memory_history(None, clear_history=True)


def allocate_a_marked_tensor():
    return torch.ones(12345, device="neuron")


def _python_names(frames):
    return [f["name"] for f in frames if f["filename"].endswith(".py")]


def test_events_carry_the_stack_that_caused_them(recording):
    kept = allocate_a_marked_tensor()
    gone = torch.zeros(77, device="neuron")
    del gone
    trace = memory._snapshot()["device_traces"][0]
    actions = [e["action"] for e in trace]
    assert {"alloc", "free_requested", "free_completed"} <= set(actions)
    allocs = [e for e in trace if e["action"] == "alloc" and "allocate_a_marked_tensor" in _python_names(e["frames"])]
    assert len(allocs) == 1 and allocs[0]["size"] >= kept.nbytes and allocs[0]["addr"] == kept.data_ptr()
    frees = [e for e in trace if e["action"] == "free_completed"]
    assert frees and "test_events_carry_the_stack_that_caused_them" in _python_names(frees[-1]["frames"])
    assert all(set(e) == {"action", "addr", "size", "stream", "time_us", "frames"} for e in trace)


def test_blocks_of_the_snapshot_match_the_allocator(recording):
    t = allocate_a_marked_tensor()
    segments = memory._snapshot()["segments"]
    mine = [s for s in segments if s["address"] == t.data_ptr()]
    assert len(mine) == 1
    seg = mine[0]
    assert seg["blocks"][0]["state"] == "active_allocated" and seg["blocks"][0]["requested_size"] == t.nbytes
    assert "allocate_a_marked_tensor" in _python_names(seg["blocks"][0]["frames"])
    assert sum(s["allocated_size"] for s in segments) == torch.neuron.memory_allocated()
    assert sum(s["total_size"] for s in segments) == torch.neuron.memory_reserved()


def test_segments_taken_and_given_back(recording):
    t = torch.empty(3 << 20, dtype=torch.uint8, device="neuron")
    addr = t.data_ptr()
    del t
    torch.neuron.empty_cache()
    actions = [(e["action"], e["addr"]) for e in memory._snapshot()["device_traces"][0]]
    assert ("segment_free", addr) in actions and ("free_completed", addr) in actions


def test_out_of_memory_is_an_event(recording):
    capacity = torch.neuron.memory.get_hbm_capacity()
    torch.neuron.memory.set_hbm_capacity("64MiB")
    try:
        with pytest.raises(torch.OutOfMemoryError):
            torch.empty(1 << 30, dtype=torch.uint8, device="neuron")
    finally:
        torch.neuron.memory.set_hbm_capacity(capacity)
    ooms = [e for e in memory._snapshot()["device_traces"][0] if e["action"] == "oom"]
    assert len(ooms) == 1 and ooms[0]["size"] >= 1 << 30
    assert "test_out_of_memory_is_an_event" in _python_names(ooms[0]["frames"])


def test_pytorch_visualizer_reads_the_dump(recording, tmp_path):
    t = allocate_a_marked_tensor()
    path = tmp_path / "snap.pickle"
    memory._dump_snapshot(str(path))
    data = pickle.loads(path.read_bytes())
    assert "segments: " in _memory_viz.segsum(data)
    lines = lambda flamegraph_lines: flamegraph_lines  # noqa: E731 - the stacks as text (no flamegraph.pl download)
    assert "allocate_a_marked_tensor" in _memory_viz.memory(data, format_flamegraph=lines)
    assert "allocate_a_marked_tensor" in _memory_viz.segments(data, format_flamegraph=lines)
    for html in (_memory_viz.trace_plot(data), _memory_viz.segment_plot(data)):
        assert html.startswith("<!DOCTYPE html>") or "<html" in html[:200]
    del t


def test_state_only_context_none_max_entries_and_stop():
    memory._record_memory_history("state", clear_history=True)
    t = allocate_a_marked_tensor()
    snap = memory._snapshot()
    assert snap["device_traces"][0] == []
    assert any("allocate_a_marked_tensor" in _python_names(s["frames"]) for s in snap["segments"])
    memory._record_memory_history("all", context=None, max_entries=3, clear_history=True)
    for _ in range(5):
        torch.ones(10, device="neuron")
    trace = memory._snapshot()["device_traces"][0]
    assert len(trace) == 3 and all(e["frames"] == [] for e in trace)
    memory._record_memory_history(None)
    torch.ones(10, device="neuron")
    assert len(memory._snapshot()["device_traces"][0]) == 3  # stopped: kept, not growing
    memory._record_memory_history(None, clear_history=True)
    del t


def test_bad_arguments_are_refused_by_name():
    with pytest.raises(ValueError, match="enabled='yes'"):
        memory._record_memory_history("yes")
    with pytest.raises(ValueError, match="stacks='cpp'"):
        memory._record_memory_history(stacks="cpp")
    with pytest.raises(ValueError, match="unknown action"):
        memory._record_memory_history(skip_actions=["allocate"])
    with pytest.raises(NotImplementedError, match="compile_context"):
        memory._record_memory_history(compile_context=True)
