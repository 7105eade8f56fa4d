"""torch.neuron.memory._record_memory_history / _snapshot / _dump_snapshot, as torch.cuda.memory's: events with
their stacks, the allocator's blocks, out-of-memory events, and snapshots that PyTorch's visualizer reads."""
import json
import pickle

import pytest
import torch
from torch.cuda import _memory_viz

import torchneuron_ext  # noqa: F401
from tests.conftest import run_python

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
    # Every core's segments, each core's sums its own (an earlier test may have left memory on another core).
    for d in range(torch.neuron.device_count()):
        mine = [s for s in segments if s["device"] == d]
        assert sum(s["allocated_size"] for s in mine) == torch.neuron.memory_allocated(d), d
        assert sum(s["total_size"] for s in mine) == torch.neuron.memory_reserved(d), d


# A host kernel's output the core adopts instead of allocating: under TORCHNEURON_EXT_NUMERICS=trainium a
# float64 op computes in float32 and widens its result on the host, in host memory the core then adopts.
_ADOPTING_RUN = """
import json, pickle, warnings
import torch, torchneuron_ext
from torch.cuda import _memory_viz
warnings.simplefilter("ignore")
memory = torch.neuron.memory
x = torch.arange(1000, dtype=torch.float64, device="neuron")
memory._record_memory_history(max_entries=100_000, clear_history=True)
def a_host_kernel_output():
    return x * 2
adopted_before = memory.memory_stats()["adopted_bytes.all.current"]
y = a_host_kernel_output()
out = {"adopted": memory.memory_stats()["adopted_bytes.all.current"] - adopted_before, "addr": y.data_ptr(),
       "nbytes": y.nbytes, "correct": torch.equal(y.cpu(), torch.arange(1000, dtype=torch.float64) * 2)}
snap = memory._snapshot()
out["segments"] = [{k: s[k] for k in ("address", "total_size", "allocated_size", "requested_size")} |
                   {"state": s["blocks"][0]["state"], "names": [f["name"] for f in s["blocks"][0]["frames"]]}
                   for s in snap["segments"] if s["address"] == y.data_ptr()]
out["listed"] = [b["adopted"] for b in memory.memory_snapshot() if b["address"] == y.data_ptr()]
core0 = [s for s in snap["segments"] if s["device"] == 0]
out["sums"] = [sum(s["allocated_size"] for s in core0), memory.memory_allocated(0),
               sum(s["total_size"] for s in core0), memory.memory_reserved(0)]
out["viz"] = "segments: " in _memory_viz.segsum(pickle.loads(pickle.dumps(snap)))
addr = y.data_ptr()
del y
trace = memory._snapshot()["device_traces"][0]
out["events"] = [[e["action"], [f["name"] for f in e["frames"]]] for e in trace if e["addr"] == addr]
out["after"] = [s["address"] for s in memory._snapshot()["segments"] if s["address"] == addr]
out["reserved_after"] = [sum(s["total_size"] for s in memory._snapshot()["segments"] if s["device"] == 0),
                         memory.memory_reserved(0)]
print("RESULT " + json.dumps(out))
"""


def test_an_adopted_host_kernel_output_has_its_segment_and_events():
    r = run_python(_ADOPTING_RUN, env={"TORCHNEURON_EXT_NUMERICS": "trainium"}, timeout=300)
    assert r.returncode == 0, r.stderr
    out = json.loads(next(ln for ln in r.stdout.splitlines() if ln.startswith("RESULT "))[len("RESULT "):])
    assert out["correct"] and out["adopted"] == out["nbytes"] == 8000  # the run did adopt
    [seg] = out["segments"]
    assert seg["total_size"] == seg["allocated_size"] == seg["requested_size"] == 8000
    assert seg["state"] == "active_allocated" and "a_host_kernel_output" in seg["names"]
    assert out["listed"] == [True]
    allocated, memory_allocated, reserved, memory_reserved = out["sums"]
    assert allocated == memory_allocated and reserved == memory_reserved
    assert out["viz"]
    actions = [a for a, _ in out["events"]]
    # Taken as a segment of its own with its one block; freed, the segment goes back with it.
    assert actions == ["segment_alloc", "alloc", "free_requested", "free_completed", "segment_free"]
    assert "a_host_kernel_output" in out["events"][1][1]
    assert out["after"] == [] and out["reserved_after"][0] == out["reserved_after"][1]


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
