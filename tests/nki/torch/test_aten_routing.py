"""route_aten: an ATen operator on neuron runs through an NKI implementation, with a fallback to its
normal kernel (issue 6, point 6)."""
import warnings

import pytest
import torch
from expecttest import TestCase

import torchneuron_ext
from torchneuron_ext.nki.aten_routing import route_aten, routes
from torchneuron_ext.nki.torch_ops import nki_op, wrap_nki
from tests.nki.torch.kernels import assert_rms_norm_matches_cpu, relu_kernel, rms_norm_kernel, rms_norm_op


nki_rms_norm = rms_norm_op("nki_route_test")


def rms_norm_route(x, normalized_shape, weight=None, eps=None):
    """What the kernel takes: 2-D float32 with rows in tiles of 128, a weight, one normalized dim."""
    if (x.dim() != 2 or x.shape[0] % 128 or x.dtype != torch.float32 or weight is None
            or list(normalized_shape) != [x.shape[-1]]):
        return NotImplemented
    return nki_rms_norm(x, weight, 1e-6 if eps is None else eps)


@pytest.fixture
def rms_route():
    route = route_aten("aten::rms_norm", rms_norm_route)
    yield route
    route.remove()


@pytest.fixture(autouse=True)
def _no_leftover_routes():
    yield
    for r in routes().values():
        r.remove()


def _data(rows=256, cols=64, dtype=torch.float32):
    g = torch.Generator().manual_seed(3)
    return torch.randn(rows, cols, generator=g).to(dtype), torch.randn(cols, generator=g).to(dtype)


def test_rms_norm_runs_the_kernel_forward_and_backward(rms_route):
    xc, wc = _data()
    x, w = xc.to("neuron").requires_grad_(), wc.to("neuron").requires_grad_()
    torchneuron_ext.clear_op_tracking()
    out = torch.rms_norm(x, (64,), w, 1e-5)
    out.backward(torch.ones_like(out))
    counts = torchneuron_ext.get_op_counts()
    assert counts["nki::rms_norm_kernel"] == {"nki": 1}
    assert counts["nki::rms_norm_backward_kernel"] == {"nki": 1}
    assert "aten::rsqrt" not in counts or counts["aten::rsqrt"] == {"native": 1}   # only in the weight grad
    assert rms_route.routed == 1 and rms_route.fallbacks == 0
    assert_rms_norm_matches_cpu(out, x, w, xc, wc, 1e-5)


def test_module_and_functional_forms_are_routed(rms_route):
    xc, wc = _data()
    norm = torch.nn.RMSNorm(64, eps=1e-6).to("neuron")
    with torch.no_grad():
        norm.weight.copy_(wc)
    out = norm(xc.to("neuron"))
    torch.testing.assert_close(out.detach().cpu(), torch.rms_norm(xc, (64,), wc, 1e-6))
    torch.nn.functional.rms_norm(xc.to("neuron"), (64,), wc.to("neuron"))
    assert rms_route.routed == 2


@pytest.mark.parametrize("case", ["rows_not_tileable", "bfloat16", "no_weight", "3d"])
def test_fallback_for_inputs_the_kernel_cannot_take(rms_route, case):
    xc, wc = _data(rows=100 if case == "rows_not_tileable" else 256,
                   dtype=torch.bfloat16 if case == "bfloat16" else torch.float32)
    if case == "3d":
        xc = xc.reshape(4, 64, 64)
    weight = None if case == "no_weight" else wc
    x = xc.to("neuron").requires_grad_()
    w = None if weight is None else weight.to("neuron").requires_grad_()
    torchneuron_ext.clear_op_tracking()
    out = torch.rms_norm(x, (64,), w)
    out.sum().backward()
    assert rms_route.fallbacks == 1 and rms_route.routed == 0
    assert not any(k.startswith("nki::") for k in torchneuron_ext.get_op_counts())
    xr = xc.clone().requires_grad_()
    ref = torch.rms_norm(xr, (64,), weight)
    ref.sum().backward()
    torch.testing.assert_close(out.detach().cpu(), ref.detach())
    torch.testing.assert_close(x.grad.cpu(), xr.grad)


def test_inference_mode_and_no_grad(rms_route):
    xc, wc = _data()
    with torch.inference_mode():
        a = torch.rms_norm(xc.to("neuron"), (64,), wc.to("neuron"))
    with torch.no_grad():
        b = torch.rms_norm(xc.to("neuron"), (64,), wc.to("neuron"))
    ref = torch.rms_norm(xc, (64,), wc, 1e-6)
    torch.testing.assert_close(a.cpu(), ref)
    torch.testing.assert_close(b.cpu(), ref)
    assert rms_route.routed == 2


def test_cpu_tensors_are_not_routed(rms_route):
    xc, wc = _data()
    torch.rms_norm(xc, (64,), wc)
    assert rms_route.routed == 0 and rms_route.fallbacks == 0


def test_routed_under_compile(rms_route):
    torch._dynamo.reset()
    xc, wc = _data()
    fn = torch.compile(lambda x, w: torch.rms_norm(x, (64,), w) * 2, backend="neuron", fullgraph=True)
    torchneuron_ext.clear_op_tracking()
    out = fn(xc.to("neuron"), wc.to("neuron"))
    torch.testing.assert_close(out.cpu(), torch.rms_norm(xc, (64,), wc, 1e-6) * 2)
    assert torchneuron_ext.get_op_counts()["nki::rms_norm_kernel"] == {"nki": 1}
    assert rms_route.routed == 0 and rms_route.traced >= 1   # the compiled graph holds the kernel
    torch._dynamo.reset()


def test_compile_before_and_after_routing():
    """Routes installed or removed between compiles take effect: neither the Python dispatcher's kernel
    cache nor the compile caches (keyed with the routes) keep the old graph."""
    xc, wc = _data()
    x, w = xc.to("neuron"), wc.to("neuron")
    expected = torch.rms_norm(xc, (64,), wc, 1e-6) * 3

    def run():
        torch._dynamo.reset()
        torchneuron_ext.clear_op_tracking()
        out = torch.compile(lambda a, b: torch.rms_norm(a, (64,), b) * 3, backend="neuron", fullgraph=True)(x, w)
        torch.testing.assert_close(out.cpu(), expected)
        return "nki::rms_norm_kernel" in torchneuron_ext.get_op_counts()

    assert not run()
    with route_aten("aten::rms_norm", rms_norm_route):
        assert run()
    assert not run()
    torch._dynamo.reset()


def test_remove_restores_the_normal_kernel():
    route = route_aten("aten::rms_norm", rms_norm_route)
    assert routes() == {"aten::rms_norm": route}
    route.remove()
    assert not route.installed and routes() == {}
    xc, wc = _data()
    torchneuron_ext.clear_op_tracking()
    torch.testing.assert_close(torch.rms_norm(xc.to("neuron"), (64,), wc.to("neuron")).cpu(),
                               torch.rms_norm(xc, (64,), wc))
    assert route.routed == 0
    assert "nki::rms_norm_kernel" not in torchneuron_ext.get_op_counts()
    # And it can be installed again.
    with route_aten("aten::rms_norm", rms_norm_route) as again:
        torch.rms_norm(xc.to("neuron"), (64,), wc.to("neuron"))
        assert again.routed == 1
    assert routes() == {}


def test_route_can_call_the_operator_itself():
    """A route may compute part of its result with the operator it routes: that call is the normal one."""
    def route(x, normalized_shape, weight=None, eps=None):
        return torch.rms_norm(x, normalized_shape, weight, eps) + 0
    xc, wc = _data()
    with route_aten("aten::rms_norm", route) as r:
        out = torch.rms_norm(xc.to("neuron"), (64,), wc.to("neuron"))
    torch.testing.assert_close(out.cpu(), torch.rms_norm(xc, (64,), wc))
    assert r.routed == 1


@nki_op("nki_route_test::relu", mutates_args=())
def nki_relu(x: torch.Tensor) -> torch.Tensor:
    return relu_kernel(x)


def test_operator_with_a_derivative_formula_is_routed_at_the_backend():
    """aten::relu has its own backward (threshold_backward): the route replaces only the forward."""
    def relu_route(x):
        if x.dim() != 2 or x.shape[0] % 128:
            return NotImplemented
        return nki_relu(x)
    xc, _ = _data()
    with route_aten(torch.ops.aten.relu.default, relu_route) as route:
        assert route.keys == ("PrivateUse1",)
        x = xc.to("neuron").requires_grad_()
        out = torch.relu(x)
        out.sum().backward()
        torch.testing.assert_close(out.detach().cpu(), torch.relu(xc))
        torch.testing.assert_close(x.grad.cpu(), (xc > 0).float())
        small = torch.relu(xc[:100].to("neuron"))
        torch.testing.assert_close(small.cpu(), torch.relu(xc[:100]))
        assert route.routed == 1 and route.fallbacks == 1


class TestErrors(TestCase):
    def tearDown(self):
        for r in routes().values():
            r.remove()

    def test_unknown_operator(self):
        with self.assertRaises(ValueError) as cm:
            route_aten("aten::rms_norm_fast", rms_norm_route)
        self.assertExpectedInline(str(cm.exception), """\
no operator 'aten::rms_norm_fast': give its name as in the schema, e.g. 'aten::rms_norm' or 'aten::add.Tensor'""")

    def test_in_place_operator(self):
        with self.assertRaises(ValueError) as cm:
            route_aten("aten::add_.Tensor", lambda *a: NotImplemented)
        self.assertExpectedInline(str(cm.exception), """\
aten::add_.Tensor writes into its arguments (aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)); only functional operators can be routed to an NKI kernel: route the functional form (e.g. aten::add.Tensor rather than aten::add_.Tensor)""")

    def test_view_operator(self):
        with self.assertRaises(ValueError) as cm:
            route_aten("aten::transpose.int", lambda *a: NotImplemented)
        self.assertExpectedInline(str(cm.exception), """\
aten::transpose.int returns a view of its input (aten::transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a)); an NKI kernel writes new memory, so it cannot implement a view operator""")

    def test_already_routed(self):
        route_aten("aten::rms_norm", rms_norm_route)
        with self.assertRaises(RuntimeError) as cm:
            route_aten("aten::rms_norm", rms_norm_route)
        self.assertExpectedInline(str(cm.exception), """\
aten::rms_norm is already routed to rms_norm_route: remove() that route first""")

    def test_wrong_result_shape(self):
        def bad(x, normalized_shape, weight=None, eps=None):
            return nki_rms_norm(x, weight, 1e-6)[:128]
        xc, wc = _data()
        with route_aten("aten::rms_norm", bad):
            with self.assertRaises(RuntimeError) as cm:
                torch.rms_norm(xc.to("neuron"), (64,), wc.to("neuron"))
        self.assertExpectedInline(str(cm.exception), """\
the NKI route for aten::rms_norm returned [128, 64] float32 on neuron but the operator returns [256, 64] float32 on neuron for these inputs; return NotImplemented from bad for inputs the kernel does not handle""")

    def test_result_without_autograd_history(self):
        def no_grad_path(x, normalized_shape, weight=None, eps=None):
            return wrap_nki(rms_norm_kernel)(x, weight, 1e-6)   # the raw kernel: no backward
        xc, wc = _data()
        with route_aten("aten::rms_norm", no_grad_path), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the kernel's own "no autograd history" warning
            with self.assertRaises(RuntimeError) as cm:
                torch.rms_norm(xc.to("neuron").requires_grad_(), (64,), wc.to("neuron"))
            torch.rms_norm(xc.to("neuron"), (64,), wc.to("neuron"))  # fine without grad
        self.assertExpectedInline(str(cm.exception), """\
the NKI route for aten::rms_norm returned a result without autograd history although an input requires grad, so gradients would be silently lost. aten::rms_norm has no derivative formula of its own (it is CompositeImplicitAutograd): route it to an nki_op with op.register_autograd(backward, setup_context=...), or return NotImplemented when inputs require grad""")
