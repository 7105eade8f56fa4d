"""nki_op and wrap_nki: NKI kernels as PyTorch operators, in eager, autograd and torch.compile (issue 6,
point 6)."""
import numpy as np
import pytest
import torch
from expecttest import TestCase
from torch._subclasses.fake_tensor import FakeTensorMode

import torchneuron_ext
from torchneuron_ext.compiler import graph_breaks
from torchneuron_ext.compiler.backend import neuron_backend
from torchneuron_ext.nki import torch_ops
from torchneuron_ext.nki.torch_ops import nki_op, wrap_nki
from tests.nki.torch.kernels import (add_into, add_kernel, assert_rms_norm_matches_cpu, axpy_, copy_new, rms_norm_op,
                                      scale_)


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@nki_op("nki_test::add", mutates_args=())
def nki_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return wrap_nki(add_kernel)[x.shape[0] // 128](x, y)


@nki_op("nki_test::add_into", mutates_args={"out"})
def nki_add_into(x: torch.Tensor, y: torch.Tensor, out: torch.Tensor) -> None:
    add_into(x, y, out)


nki_rms_norm = rms_norm_op("nki_test")


def _inputs(rows=256, cols=64, device="neuron"):
    g = torch.Generator().manual_seed(1)
    return torch.randn(rows, cols, generator=g).to(device), torch.randn(rows, cols, generator=g).to(device)


def _forward_graphs(fn, *args):
    """Compile fn with the neuron backend and return the forward ATen graphs AOTAutograd produced."""
    from torch._functorch.aot_autograd import aot_module_simplified
    graphs = []

    def backend(gm, example_inputs):
        def fw(g, inputs):
            graphs.append(g)
            return g
        return aot_module_simplified(gm, example_inputs, fw_compiler=fw)
    out = torch.compile(fn, backend=backend, fullgraph=True)(*args)
    return out, graphs


def _calls(graph, target_prefix):
    return [n for n in graph.graph.nodes if n.op == "call_function" and str(n.target).startswith(target_prefix)]


# -------------------------------------------------------------------------------------------------
# eager
# -------------------------------------------------------------------------------------------------

def test_nki_op_eager_matches_torch():
    x, y = _inputs()
    out = nki_add(x, y)
    assert out.device.type == "neuron"
    torch.testing.assert_close(out.cpu(), x.cpu() + y.cpu(), rtol=0, atol=0)
    # It is a dispatcher operator with the schema inferred from the annotations.
    assert str(torch.ops.nki_test.add.default._schema) == "nki_test::add(Tensor x, Tensor y) -> Tensor"


def test_nki_op_cpu_tensors():
    x, y = _inputs(device="cpu")
    torch.testing.assert_close(nki_add(x, y), x + y, rtol=0, atol=0)


def test_nki_op_mutating_eager():
    x, y = _inputs()
    out = torch.zeros_like(x)
    assert nki_add_into(x, y, out) is None
    torch.testing.assert_close(out.cpu(), x.cpu() + y.cpu(), rtol=0, atol=0)
    assert "Tensor(a2!) out" in str(torch.ops.nki_test.add_into.default._schema)


def test_wrap_nki_forms():
    x, y = _inputs()
    expected = x.cpu() + y.cpu()
    torch.testing.assert_close(wrap_nki(add_kernel)[2](x, y).cpu(), expected, rtol=0, atol=0)
    torch.testing.assert_close(wrap_nki(add_kernel[2])(x, y).cpu(), expected, rtol=0, atol=0)
    torch.testing.assert_close(wrap_nki(add_kernel)[(2,)](x, y).cpu(), expected, rtol=0, atol=0)
    assert repr(wrap_nki(add_kernel)[2]) == "wrap_nki(add_kernel)[2]"
    assert torchneuron_ext.wrap_nki is wrap_nki and torchneuron_ext.nki_op is nki_op


def test_fake_tensors_give_shapes_without_running_on_data():
    x, y = _inputs()
    with FakeTensorMode() as mode:
        fx, fy = mode.from_tensor(x), mode.from_tensor(y)
        out = nki_add(fx, fy)
        direct = add_kernel[2](fx, fy)
    for o in (out, direct):
        assert o.shape == (256, 64) and o.dtype == torch.float32 and o.device.type == "neuron"
        assert type(o).__name__ == "FakeTensor"


def test_numpy_launch_inside_a_tracing_mode_runs_directly():
    a = np.ones((128, 8), dtype=np.float32)
    with FakeTensorMode():
        out = add_kernel[1](a, a)
    assert isinstance(out, np.ndarray) and (out == 2).all()


def test_plan_is_cached_per_shape_dtype_grid_and_constants():
    torch_ops.clear_plan_cache()
    x, y = _inputs()
    half = x[:128]
    with FakeTensorMode() as mode:
        fx, fy = mode.from_tensor(x), mode.from_tensor(y)
        scale_(fx, 2.0)
        scale_(fx, 2.0)
        assert len(torch_ops._plans_by_call) == 1
        scale_(fx, 3.0)                              # another constant
        scale_(mode.from_tensor(half), 2.0)       # another shape
        add_kernel[2](fx, fy)
        add_kernel[2](fx, fy)
        assert len(torch_ops._plans_by_call) == 4
    plans = list(torch_ops._plans_by_call.values())
    assert plans[0].mutated == (0,) and plans[0].layout == ("arg", 0)
    assert plans[3].mutated == () and plans[3].layout == ("created", 0)


# -------------------------------------------------------------------------------------------------
# autograd
# -------------------------------------------------------------------------------------------------

def test_register_autograd_with_nki_backward():
    xc = torch.randn(256, 64, dtype=torch.float64).float()
    wc = torch.randn(64)
    x = xc.to("neuron").requires_grad_()
    w = wc.to("neuron").requires_grad_()
    out = nki_rms_norm(x, w, 1e-5)
    out.backward(torch.ones_like(out))
    assert_rms_norm_matches_cpu(out, x, w, xc, wc, 1e-5)
    counts = torchneuron_ext.get_op_counts()
    assert "nki::rms_norm_kernel" in counts and "nki::rms_norm_backward_kernel" in counts


def test_missing_autograd_is_an_error_not_a_silent_zero():
    x, y = _inputs()
    x.requires_grad_()
    with pytest.raises(RuntimeError, match="nki_test.add.default but no autograd formula"):
        nki_add(x, y).sum().backward()


# -------------------------------------------------------------------------------------------------
# torch.compile
# -------------------------------------------------------------------------------------------------

def test_nki_op_is_one_node_under_compile():
    x, y = _inputs()

    def fn(a, b):
        return nki_add(a.sin(), b) * 2

    out, graphs = _forward_graphs(fn, x, y)
    torch.testing.assert_close(out.cpu(), fn(x, y).cpu())
    (graph,) = graphs
    assert len(_calls(graph, "nki_test.add")) == 1
    assert not _calls(graph, "torchneuron_ext_nki")   # opaque: not traced into
    assert graph_breaks(fn, x, y).graph_breaks == 0
    compiled = torch.compile(fn, backend="neuron", fullgraph=True)
    torch.testing.assert_close(compiled(x, y).cpu(), fn(x, y).cpu())


def test_nki_op_mutating_under_compile():
    x, y = _inputs()

    def fn(a, b, out):
        nki_add_into(a, b, out)
        return out + 1

    out = torch.zeros_like(x)
    result = torch.compile(fn, backend="neuron", fullgraph=True)(x, y, out)
    expected = x.cpu() + y.cpu()
    torch.testing.assert_close(out.cpu(), expected, rtol=0, atol=0)   # the graph input was updated
    torch.testing.assert_close(result.cpu(), expected + 1)


def test_direct_kernel_call_under_compile_is_one_node():
    x, y = _inputs()

    def fn(a, b):
        return add_kernel[2](a.cos(), b) - 1

    out, graphs = _forward_graphs(fn, x, y)
    torch.testing.assert_close(out.cpu(), fn(x, y).cpu())
    assert len(_calls(graphs[0], "torchneuron_ext_nki.launch")) == 1
    compiled = torch.compile(fn, backend="neuron", fullgraph=True)
    torch.testing.assert_close(compiled(x, y).cpu(), fn(x, y).cpu())


def test_kernel_updating_arguments_under_compile():
    y0, x = _inputs()

    def fn(y, x):
        y2, ax = axpy_(y, x, 0.5)
        z = scale_(y2 * 1.0, 2.0)
        return y2, ax, z

    y_eager, y_comp = y0.clone(), y0.clone()
    expected = fn(y_eager, x)
    got = torch.compile(fn, backend="neuron", fullgraph=True)(y_comp, x)
    for e, g in zip(expected, got):
        torch.testing.assert_close(g.cpu(), e.cpu())
    torch.testing.assert_close(y_comp.cpu(), y_eager.cpu())      # the in-place update reached the input
    torch.testing.assert_close(y_comp.cpu(), y0.cpu() + 0.5 * x.cpu())


def test_training_step_compiled():
    xc = torch.randn(256, 64)
    wc = torch.randn(64)

    def step(x, w):
        return (nki_rms_norm(x, w, 1e-6) ** 2).mean()

    x = xc.to("neuron").requires_grad_()
    w = wc.to("neuron").requires_grad_()
    loss = torch.compile(step, backend="neuron")(x, w)
    loss.backward()
    xr, wr = xc.clone().requires_grad_(), wc.clone().requires_grad_()
    (torch.rms_norm(xr, (64,), wr, 1e-6) ** 2).mean().backward()
    torch.testing.assert_close(x.grad.cpu(), xr.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(w.grad.cpu(), wr.grad, rtol=1e-4, atol=1e-5)


def test_compiled_launch_runs_the_kernel_each_call():
    """The graph holds the kernel, not its result: new data gives new results."""
    def fn(a, b):
        return add_kernel[2](a, b)
    compiled = torch.compile(fn, backend=neuron_backend, fullgraph=True)
    for seed in range(2):
        x, y = _inputs()
        x = x + seed
        torch.testing.assert_close(compiled(x, y).cpu(), x.cpu() + y.cpu(), rtol=0, atol=0)


@nki_op("nki_test::copy", mutates_args=())
def nki_copy(x: torch.Tensor) -> torch.Tensor:
    return copy_new[2](x)   # new dialect, two logical cores


def test_new_dialect_lnc2_kernel():
    x, _ = _inputs()
    torch.testing.assert_close(nki_copy(x).cpu(), x.cpu(), rtol=0, atol=0)
    compiled = torch.compile(lambda a: nki_copy(a) + copy_new[2](a), backend="neuron", fullgraph=True)
    torch.testing.assert_close(compiled(x).cpu(), 2 * x.cpu(), rtol=0, atol=0)


def test_second_device():
    if torch.neuron.device_count() < 2:
        pytest.skip("needs two neuron devices")
    x, y = _inputs(device="neuron:1")
    out = nki_add(x, y)
    assert out.device == torch.device("neuron:1")
    compiled = torch.compile(lambda a, b: nki_add(a, b) * 1, backend="neuron", fullgraph=True)
    assert compiled(x, y).device == torch.device("neuron:1")
    torch.testing.assert_close(out.cpu(), x.cpu() + y.cpu(), rtol=0, atol=0)


def test_dynamic_shapes():
    def fn(a, b):
        return nki_add(a, b) + add_kernel[a.shape[0] // 128](a, b)

    compiled = torch.compile(fn, backend="neuron", dynamic=True, fullgraph=True)
    for rows in (256, 384):
        x, y = _inputs(rows=rows)
        torch.testing.assert_close(compiled(x, y).cpu(), 2 * (x.cpu() + y.cpu()), rtol=0, atol=0)


def test_opcheck():
    x, y = _inputs()
    # autograd_registration_check supports only CPU/CUDA/XPU devices; autograd is tested above.
    tests = ("test_schema", "test_faketensor", "test_aot_dispatch_dynamic")
    torch.library.opcheck(nki_add, (x, y), test_utils=tests)
    torch.library.opcheck(nki_add_into, (x, y, torch.zeros_like(x)), test_utils=tests)
    torch.library.opcheck(nki_rms_norm, (x, y[0].clone(), 1e-6), test_utils=tests)


# -------------------------------------------------------------------------------------------------
# errors
# -------------------------------------------------------------------------------------------------

class TestErrors(TestCase):
    def test_name_needs_namespace(self):
        with self.assertRaises(ValueError) as cm:
            nki_op("add", mutates_args=())
        self.assertExpectedInline(str(cm.exception), """nki_op needs a name like 'mylib::my_op', got 'add'""")

    def test_decorating_the_kernel_itself(self):
        with self.assertRaises(TypeError) as cm:
            nki_op("nki_test::k", add_kernel, mutates_args=())
        self.assertExpectedInline(str(cm.exception), """\
nki_op decorates a type-annotated Python function that calls NKI kernels, not the kernel itself: write def my_op(x: torch.Tensor) -> torch.Tensor: return my_kernel(x)""")

    def test_missing_annotations(self):
        def f(x, y: torch.Tensor) -> torch.Tensor:
            return add_kernel(x, y)
        with self.assertRaises(ValueError) as cm:
            nki_op("nki_test::unannotated", f, mutates_args=())
        self.assertIn("nki_op nki_test::unannotated:", str(cm.exception))
        self.assertIn("annotate every parameter and the return type", str(cm.exception))

    def test_wrap_nki_of_plain_function(self):
        with self.assertRaises(TypeError) as cm:
            wrap_nki(lambda a: a)
        self.assertExpectedInline(str(cm.exception), """\
wrap_nki expects a kernel decorated with @nki.jit, got function: decorate the kernel function with torchneuron_ext.nki.jit (or nki.jit after torchneuron_ext.nki.compat.install())""")

    def test_unhashable_constant_under_tracing(self):
        x, _ = _inputs()
        with FakeTensorMode() as mode:
            fx = mode.from_tensor(x)
            with self.assertRaises(TypeError) as cm:
                scale_(fx, {"factor": 2.0})
        self.assertIn("non-tensor arguments are compile-time constants and must be hashable", str(cm.exception))
