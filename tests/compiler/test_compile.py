"""torch.compile on neuron: results match eager neuron (and CPU), forward and backward."""
import re

import pytest
import torch
import torch.nn.functional as F

import torchneuron_ext
from torchneuron_ext.compiler import get_metrics, graph_breaks, reset_metrics
from tests.blocks import Block


def rms_naive(x, w, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rms_fused(x, w, eps=1e-6):
    return torch.rms_norm(x, (x.shape[-1],), w, eps)


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.mark.parametrize("fn", [rms_naive, rms_fused])
def test_rmsnorm_variants_match_eager(fn):
    x, w = torch.randn(64, 128, device="neuron"), torch.randn(128, device="neuron")
    out = torch.compile(fn, backend="neuron", fullgraph=True)(x, w)
    assert out.device.type == "neuron"
    torch.testing.assert_close(out.cpu(), fn(x, w).cpu())
    torch.testing.assert_close(out.cpu(), fn(x.cpu(), w.cpu()))


def test_default_backend_on_neuron_tensors():
    x, w = torch.randn(16, 32, device="neuron"), torch.randn(32, device="neuron")
    torch.testing.assert_close(torch.compile(rms_naive)(x, w).cpu(), rms_naive(x, w).cpu())


def test_transformer_block_forward_and_backward():
    torch.manual_seed(0)
    block = Block().neuron()
    x = torch.randn(2, 8, 32, device="neuron", requires_grad=True)
    eager = block(x)
    eager.sum().backward()
    grads_eager = [p.grad.clone() for p in block.parameters()] + [x.grad.clone()]
    block.zero_grad()
    x.grad = None
    compiled = torch.compile(block, backend="neuron")(x)
    torch.testing.assert_close(compiled.cpu(), eager.detach().cpu(), rtol=1e-4, atol=1e-5)
    compiled.sum().backward()
    grads_compiled = [p.grad for p in block.parameters()] + [x.grad]
    for a, b in zip(grads_compiled, grads_eager):
        assert a.device.type == "neuron"
        torch.testing.assert_close(a.cpu(), b.cpu(), rtol=1e-4, atol=1e-5)


def test_training_loop_compiled():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2)).neuron()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    step_model = torch.compile(model, backend="neuron")
    x, y = torch.randn(32, 8, device="neuron"), torch.randint(0, 2, (32,), device="neuron")
    losses = []
    for _ in range(5):
        opt.zero_grad()
        loss = F.cross_entropy(step_model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]


def test_graph_breaks_are_reported_and_still_correct():
    def fn(x):
        y = x.sin()
        print("side effect")  # a graph break
        return y.cos() + 1

    x = torch.randn(8, device="neuron")
    torch.testing.assert_close(torch.compile(fn, backend="neuron")(x).cpu(), fn(x).cpu())
    report = graph_breaks(fn, x)
    assert report.graphs == 2 and report.graph_breaks == 1
    assert "print" in str(report) or "builtin" in str(report).lower()


def test_dynamic_shapes_recompile_only_on_guard_failure():
    from torch._dynamo.utils import counters

    counters.clear()
    f = torch.compile(lambda x: (x * 2).sum(0), backend="neuron", dynamic=True)
    for n in (4, 7, 13):
        x = torch.randn(n, 3, device="neuron")
        torch.testing.assert_close(f(x).cpu(), (x * 2).sum(0).cpu())
    assert counters["stats"]["unique_graphs"] == 1
    f(torch.randn(5, 3, 2, device="neuron"))  # rank change: guard fails, recompiles
    assert counters["stats"]["unique_graphs"] == 2


@pytest.mark.parametrize("mode", ["default", "reduce-overhead", "max-autotune-no-cudagraphs"])
def test_modes_accepted(mode):
    x = torch.randn(8, 8, device="neuron")
    torch.testing.assert_close(torch.compile(torch.relu, backend="neuron", mode=mode)(x).cpu(), x.relu().cpu())


def test_autocast_inside_compiled_region():
    def fn(a, b):
        with torch.autocast("neuron"):
            return a @ b

    a, b = torch.randn(8, 8, device="neuron"), torch.randn(8, 8, device="neuron")
    out = torch.compile(fn, backend="neuron")(a, b)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.cpu(), fn(a, b).cpu(), rtol=1e-2, atol=1e-2)


def test_metrics_and_timing():
    from torchneuron_ext.profiler import op_stats, timing

    reset_metrics()
    x, w = torch.randn(32, 64, device="neuron"), torch.randn(64, device="neuron")
    f = torch.compile(rms_naive, backend="neuron")
    f(x, w)
    with timing():
        f(x, w)
    m = get_metrics()
    assert len(m) == 1 and m[0]["nodes"] >= 5 and m[0]["kernels_generated"] >= 1 and m[0]["calls"] == 2
    assert m[0]["compile_seconds"] > 0 and m[0]["cache_hits"] + m[0]["cache_misses"] >= 1
    assert set(m[0]["phases_seconds"]) == {"aot_autograd", "inductor_lowering", "inductor_codegen", "cpp_compile",
                                           "inductor_total"}
    names = {s.name: s for s in op_stats()}
    assert names["compiled::graph_0"].tier == "compiled" and names["compiled::graph_0"].calls_timed == 1
    # The generated kernels are parts of the graph's one launch: listed only on request.
    assert not any(n.startswith("compiled::cpp_fused") and s.calls_timed for n, s in names.items())
    inside = [s for s in op_stats(nested=True) if s.nested]
    assert any(s.name.startswith("compiled::cpp_fused") and s.calls_timed == 1 for s in inside)


def test_compiled_kernels_in_profiler():
    from torch.profiler import ProfilerActivity, profile

    x, w = torch.randn(32, 64, device="neuron"), torch.randn(64, device="neuron")
    f = torch.compile(rms_naive, backend="neuron")
    f(x, w)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        f(x, w)
    keys = {e.key: e for e in prof.key_averages()}
    assert any(k.startswith("neuron::compiled::graph_") and keys[k].self_device_time_total > 0 for k in keys)
    # Generated kernels: device kernels of their own inside the graph's launch, whose time the graph's row leaves
    # out (tests/profiler/test_compiled_regions.py checks the totals).
    fused = [keys[k] for k in keys if k.startswith("neuron::compiled::cpp_fused")]
    assert fused and all(not e.is_user_annotation and e.self_device_time_total > 0 for e in fused)


def test_unknown_mode_is_a_clear_error():
    with pytest.raises(Exception, match="Unknown mode 'fastest'"):
        torch.compile(torch.relu, backend="neuron", mode="fastest")(torch.ones(2, device="neuron"))


def test_mixed_devices_error():
    f = torch.compile(lambda a, b: a + b, backend="neuron")
    with pytest.raises(Exception, match="same device|device"):
        f(torch.ones(3, device="neuron"), torch.ones(3))


def test_custom_op_is_an_opaque_node():
    @torch.library.custom_op("neuron_test::scale_add", mutates_args=())
    def scale_add(x: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
        return x * alpha + y

    @scale_add.register_fake
    def _(x, y, alpha):
        return torch.empty_like(x)

    def fn(a, b):
        return scale_add(a.sin(), b, 2.0).cos()

    a, b = torch.randn(8, device="neuron"), torch.randn(8, device="neuron")
    out = torch.compile(fn, backend="neuron", fullgraph=True)(a, b)
    torch.testing.assert_close(out.cpu(), fn(a, b).cpu())
    report = graph_breaks(fn, a, b)
    assert report.graph_breaks == 0


def test_compile_cache_artifacts_round_trip():
    x, w = torch.randn(16, 32, device="neuron"), torch.randn(32, device="neuron")
    torch.compile(rms_naive, backend="neuron")(x, w)
    saved = torch.compiler.save_cache_artifacts()
    assert saved is not None
    blob, info = saved
    assert len(blob) > 0
    torch._dynamo.reset()
    torch.compiler.load_cache_artifacts(blob)
    out = torch.compile(rms_naive, backend="neuron")(x, w)
    torch.testing.assert_close(out.cpu(), rms_naive(x, w).cpu())


@pytest.mark.parametrize("backend", ["neuron", "inductor"])
def test_buffers_come_from_the_direct_allocation(backend):
    """Intermediate buffers use neuron's counterpart of Inductor's empty_strided_cpu/cuda fast path."""
    from torch._inductor.utils import run_and_get_code

    def f(x, w):
        y = torch.relu(x @ w)
        return (y.softmax(-1) * 2).sum(0), y.t().contiguous()

    torch._dynamo.reset()
    x, w = torch.randn(16, 8), torch.randn(8, 8)
    (out, t), codes = run_and_get_code(torch.compile(f, backend=backend), x.to("neuron"), w.to("neuron"))
    code = "\n".join(codes)
    assert "_neuron_empty_strided(" in code
    assert re.search(r"= empty_strided\(.*device='neuron'", code) is None
    ref_out, ref_t = f(x, w)
    torch.testing.assert_close(out.cpu(), ref_out)
    torch.testing.assert_close(t.cpu(), ref_t)
    assert t.device == torch.device("neuron", 0) and t.stride() == ref_t.stride()


def test_direct_allocation_arguments():
    from torchneuron_ext._C import _empty_strided

    t = _empty_strided((2, 3), (1, 2), torch.bfloat16, -1)
    assert t.device == torch.device("neuron", 0) and t.dtype == torch.bfloat16
    assert t.shape == (2, 3) and t.stride() == (1, 2)
    assert _empty_strided([4], [1], torch.int64, 0).shape == (4,)
    with pytest.raises(TypeError, match="size must be a tuple of ints"):
        _empty_strided("x", (1,), torch.float32, 0)
    with pytest.raises(TypeError, match="dtype must be a torch.dtype"):
        _empty_strided((1,), (1,), "float32", 0)
    with pytest.raises(TypeError, match="takes 4 arguments"):
        _empty_strided((1,), (1,), torch.float32)
    with pytest.raises(RuntimeError, match="1 sizes but 2 strides"):
        _empty_strided((1,), (1, 1), torch.float32, 0)
    with pytest.raises(RuntimeError):
        _empty_strided((1,), (1,), torch.float32, 99)
    assert (torch.ones(2, device="neuron") + 1).cpu().tolist() == [2.0, 2.0]


def test_generated_kernels_are_called_directly_unless_timed():
    """Compiled graphs call their C++ kernels through _C._run_kernel: the kernel itself while timing is
    off, compiler.runtime.run_kernel_rw (which records it) while it is on."""
    from torchneuron_ext import _C
    from torchneuron_ext.compiler import runtime
    from torchneuron_ext.profiler import reset_timing, timing

    seen = []

    def kernel(*args):
        seen.append(args)
        return "done"

    x = torch.ones(3, device="neuron")
    assert _C._run_kernel("k", kernel, "r", x, 2) == "done" and seen[-1] == (x, 2)
    calls = []
    original = runtime.run_kernel_rw
    runtime.run_kernel_rw = lambda *a: calls.append(a) or original(*a)
    try:
        reset_timing()
        with timing():
            assert _C._run_kernel("k", kernel, "r", x, 2) == "done"
        assert [a[0] for a in calls] == ["k"] and seen[-1] == (x, 2)
    finally:
        runtime.run_kernel_rw = original

    def failing(*args):
        raise ValueError("kernel failed")

    with pytest.raises(ValueError, match="kernel failed"):
        _C._run_kernel("k", failing, "")
    with pytest.raises(TypeError, match="at least 3 arguments"):
        _C._run_kernel("k", kernel)
    from torch._inductor.utils import run_and_get_code

    torch._dynamo.reset()
    y, codes = run_and_get_code(torch.compile(lambda t: (t * 2).relu() + 1, backend="neuron"), x)
    assert "import _run_kernel as _neuron_run_kernel_rw" in "\n".join(codes)
    assert y.cpu().tolist() == [3.0, 3.0, 3.0]
