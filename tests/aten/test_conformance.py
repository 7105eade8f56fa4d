"""What PyTorch's device-generic tests expect of a device (issue 17): no crash, no internal assert,
no silent wrong answer where the CPU gives a right one or an error."""
import subprocess
import sys
import textwrap

import pytest
import torch
from expecttest import TestCase

import torchneuron_ext  # noqa: F401
from torchneuron_ext import _C


def n(t):
    return t.to("neuron")


def run_isolated(code: str) -> subprocess.CompletedProcess:
    """A crash (SIGSEGV) must fail the test, not the test run."""
    return subprocess.run([sys.executable, "-c", "import torch, torchneuron_ext\n" + textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=300)


# ---- efficient zero tensors (item 2) -------------------------------------------------------------

ZERO_TENSOR_OPS = """
import torch
def zt(dev):
    return torch._efficientzerotensor(3, device=dev)
ones = lambda dev: torch.ones(3, device=dev)
cases = {
    "mul.Scalar": lambda d: torch.ops.aten.mul.Scalar(zt(d), 2.0),
    "add.Scalar": lambda d: torch.ops.aten.add.Scalar(zt(d), 2.0),
    "mul.Tensor": lambda d: torch.mul(zt(d), ones(d)),
    "add.Tensor": lambda d: torch.add(zt(d), ones(d)),
    "dot": lambda d: torch.dot(zt(d), ones(d)),
    "vdot": lambda d: torch.vdot(zt(d), ones(d)),
    "zeros_like": lambda d: torch.zeros_like(zt(d)),
    "clone": lambda d: zt(d).clone(),
    "copy_": lambda d: ones(d).copy_(zt(d)),
    "isclose": lambda d: torch.isclose(zt(d), torch.zeros(3, device=d)),
    "isclose(other=zero)": lambda d: torch.isclose(torch.zeros(3, device=d), zt(d)),
}
for name, f in cases.items():
    cpu, dev = f("cpu"), f("neuron")
    assert dev.device.type == "neuron", name
    assert dev._is_zerotensor() == cpu._is_zerotensor(), (name, dev._is_zerotensor(), cpu._is_zerotensor())
    torch.testing.assert_close(dev.cpu(), cpu, msg=name)
print("ok")
"""


def test_efficient_zero_tensors_behave_as_on_cpu():
    r = run_isolated(ZERO_TENSOR_OPS)
    assert r.returncode == 0, (r.returncode, r.stderr[-3000:])
    assert r.stdout.strip().endswith("ok")


def test_sgn_gradient_of_real_input_compares():
    """sgn's gradient for real inputs is an efficient zero tensor; comparing it called mul.Scalar."""
    r = run_isolated("""
        x = torch.randn(4, device="neuron", requires_grad=True)
        (g,) = torch.autograd.grad(torch.sgn(x).sum(), x)
        assert g._is_zerotensor()
        zeros = torch.zeros(4, device="neuron")
        assert torch.isclose(g, zeros).all().item() and torch.isclose(zeros, g).all().item()
        torch.testing.assert_close(torch.ops.aten.mul.Scalar(g, 2.0).cpu(), torch.zeros(4))
        torch.testing.assert_close((g * 2.0).cpu(), torch.zeros(4))
        print("ok")
    """)
    assert r.returncode == 0, (r.returncode, r.stderr[-3000:])


# ---- composites that reached a DispatchStub or a CPU-only path (item 2, item 6) -----------------

def test_conj_physical_in_place_on_complex():
    ref = torch.randn(5, dtype=torch.complex64)
    x = n(ref.clone())
    assert torch.conj_physical_(x) is x
    torch.testing.assert_close(x.cpu(), torch.conj_physical_(ref.clone()))
    assert not x.is_conj()


def test_no_composite_reaches_a_missing_dispatch_stub():
    """Every CompositeExplicitAutograd-only operator with tensor arguments now runs the CPU's
    composite on host views (or is deliberately left on the device's own kernels)."""
    C = torch._C
    composite_only = []
    for name in C._dispatch_get_all_op_names():
        if not name.startswith("aten::"):
            continue
        if C._dispatch_has_kernel_for_dispatch_key(name, "CPU"):
            continue
        if C._dispatch_has_kernel_for_dispatch_key(name, "CompositeExplicitAutograd") or \
                C._dispatch_has_kernel_for_dispatch_key(name, "CompositeExplicitAutogradNonFunctional"):
            composite_only.append(name)
    routed = [o for o in composite_only if C._dispatch_has_kernel_for_dispatch_key(o, "PrivateUse1")]
    assert len(routed) > 500, len(routed)
    for op in ("aten::conj_physical_", "aten::ldexp_", "aten::ldexp.Tensor", "aten::linalg_lstsq",
               "aten::logcumsumexp", "aten::cummax"):
        assert op in routed, op
    # views, device copies and allocation-only factories stay on the device's kernels: no PrivateUse1 kernel,
    # or the composite itself registered for op tracking (tracked_composites.cpp), not the host path
    def routed_to_host(op):
        entry = [line for line in C._dispatch_dump(op).splitlines() if line.startswith("PrivateUse1:")]
        return op in routed and not any("tracked_composites.cpp" in line for line in entry)
    for op in ("aten::permute", "aten::expand", "aten::_to_copy", "aten::clone", "aten::empty_like"):
        assert not routed_to_host(op), op


@pytest.mark.parametrize("fn", [
    lambda x: torch.logcumsumexp(x, 0),
    lambda x: torch.cummax(x, 1)[0],
    lambda x: torch.cummin(x, 1)[1],
    lambda x: torch.deg2rad(x),
    lambda x: torch.rot90(x),
    lambda x: torch.count_nonzero(x > 0),
    lambda x: torch.ldexp(x, torch.ones_like(x)),
    lambda x: torch.xlogy(2.0, x.abs()),
    lambda x: torch.nn.functional.celu(x),
    lambda x: torch.block_diag(x, x),
    lambda x: torch.dist(x, x.flip(0)),
    lambda x: torch.linalg.lstsq(x @ x.T + 4 * torch.eye(4, device=x.device), x).solution,
])
def test_routed_composites_match_cpu(fn):
    ref = torch.randn(4, 4, generator=torch.Generator().manual_seed(0))
    out = fn(n(ref))
    assert out.device.type == "neuron"
    torch.testing.assert_close(out.cpu(), fn(ref))


def test_ldexp_in_place_broadcast_raises_as_cpu():
    a, b = torch.randn(3, 1), torch.randn(1, 4)
    with pytest.raises(RuntimeError) as cpu:
        a.clone().ldexp_(b)
    x = n(a)
    with pytest.raises(RuntimeError) as dev:
        x.ldexp_(n(b))
    assert str(dev.value) == str(cpu.value)
    assert x.shape == (3, 1)
    y = n(torch.randn(3, 4))
    ref = y.cpu().ldexp_(b)
    torch.testing.assert_close(y.ldexp_(n(b)).cpu(), ref)


def test_aliased_arguments_are_seen_by_cpu_checks():
    """One tensor passed as input and out= is one tensor to the CPU kernel (its in-place and
    overlap checks), and views of one storage overlap there as on the device."""
    a = n(torch.randn(3, 1))
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        torch.mul(a, n(torch.randn(1, 4)), out=a)
    base = n(torch.arange(6.0))
    with pytest.raises(RuntimeError, match="unsupported operation"):
        torch.add(base[:4], 1, out=base[1:5])
    cpu = torch.arange(6.0)
    with pytest.raises(RuntimeError, match="unsupported operation"):
        torch.add(cpu[:4], 1, out=cpu[1:5])
    x = n(torch.randn(4))
    ref = x.cpu()
    torch.testing.assert_close(x.add_(x).cpu(), ref + ref)


# ---- out= on the wrong device (item 5) ------------------------------------------------------------

class TestOutDevice(TestCase):
    def test_zero_dim_cpu_out_raises(self):
        x = n(torch.randn(3))
        for call in (
            lambda o: torch.sum(x, 0, out=o),
            lambda o: torch.add(n(torch.tensor(1.0)), n(torch.tensor(2.0)), out=o),
            lambda o: torch.amax(x, 0, out=o),
            lambda o: torch.logsumexp(x, 0, out=o),
            lambda o: torch.dot(x, x, out=o),
        ):
            o = torch.tensor(0.0)
            with self.assertRaises(RuntimeError) as cm:
                call(o)
            self.assertExpectedInline(str(cm.exception).splitlines()[0],
                                      """Expected out tensor to have device neuron:0, but got out.device() = cpu""")
            self.assertEqual(o.item(), 0.0)

    def test_zero_dim_cpu_out_raises_for_tuples(self):
        x = n(torch.randn(3, 4))
        values, indices = torch.tensor(0.0), torch.tensor(0)
        with self.assertRaises(RuntimeError) as cm:
            torch.max(x[0], 0, out=(values, indices))
        self.assertIn("Expected out tensor to have device neuron:0", str(cm.exception))

    def test_zero_dim_cpu_in_place_self_raises(self):
        s = torch.tensor(1.0)
        with self.assertRaises(RuntimeError):
            s.add_(n(torch.tensor(2.0)))
        self.assertEqual(s.item(), 1.0)

    def test_cpu_scalars_stay_allowed_as_inputs(self):
        x = n(torch.randn(3))
        s = torch.tensor(2.0)
        torch.testing.assert_close((x * s).cpu(), x.cpu() * s)
        o = n(torch.empty(3))
        torch.mul(x, s, out=o)
        torch.testing.assert_close(o.cpu(), x.cpu() * s)
        torch.testing.assert_close(torch.where(x > 0, x, s).cpu(), torch.where(x.cpu() > 0, x.cpu(), s))


# ---- quantized tensors (item 8) -------------------------------------------------------------------

class TestQuantized(TestCase):
    def test_quantize_on_neuron_raises_at_creation(self):
        x = n(torch.randn(4))
        with self.assertRaises(NotImplementedError) as cm:
            torch.quantize_per_tensor(x, 0.1, 0, torch.qint8)
        self.assertExpectedInline(str(cm.exception).splitlines()[0], """aten::quantize_per_tensor: quantized tensors are not supported on neuron (it has no quantized tensor type). Quantize on the CPU, or use fake quantization (torch.fake_quantize_per_tensor_affine, float tensors) on neuron.""")

    def test_quantized_dtypes_and_moves_raise(self):
        for dtype in (torch.qint8, torch.quint8, torch.qint32):
            with self.assertRaisesRegex(NotImplementedError, "quantized tensors are not supported on neuron"):
                torch.empty(2, dtype=dtype, device="neuron")
        q = torch.quantize_per_tensor(torch.randn(4), 0.1, 0, torch.qint8)
        with self.assertRaisesRegex(NotImplementedError, "quantized tensors are not supported on neuron"):
            q.to("neuron")

    def test_fake_quantization_runs_on_neuron(self):
        x = torch.randn(8)
        ref = torch.fake_quantize_per_tensor_affine(x, 0.1, 0, -128, 127)
        torch.testing.assert_close(torch.fake_quantize_per_tensor_affine(n(x), 0.1, 0, -128, 127).cpu(), ref)


# ---- op tracking tiers and _copy_from's device check (item 10) ------------------------------------

def test_tier_names_are_one_definition():
    names = _C._tier_names()
    assert names == ["native", "generic", "compiled", "nki", "custom", "collective"]
    for tier in names:
        _C._record_kernel(f"test::tier_{tier}", tier, 0, 0, 0, 0, 0, 0)
    counts = {(name, tier): calls for name, tier, calls in _C._op_counts()}
    for tier in names:
        assert counts[(f"test::tier_{tier}", tier)] >= 1
    with pytest.raises(ValueError, match="unknown tier 'bogus'"):
        _C._record_kernel("test::bogus", "bogus", 0, 0, 0, 0, 0, 0)


def test_collective_tier_counters_are_kept_apart():
    """The last tier's counters lived past the end of the per-tier table (in the generic path's
    map): after the generic map grows, each counter must still be found once by its name."""
    r = run_isolated("""
        from torchneuron_ext import _C
        names = [f"c10d::test_{i}" for i in range(64)]
        for name in names:
            _C._record_kernel(name, "collective", 0, 0, 0, 0, 0, 0)
        x = torch.randn(4, 4, device="neuron")
        for f in (torch.erfinv, torch.lgamma, torch.digamma, torch.special.i0, torch.special.i1, torch.special.ndtri,
                  torch.special.entr, torch.special.erfcx, torch.special.i0e, torch.special.i1e, torch.linalg.det,
                  torch.linalg.slogdet, torch.linalg.inv, torch.special.log_ndtr, torch.special.bessel_j0,
                  torch.special.bessel_j1, torch.special.spherical_bessel_j0, torch.special.airy_ai):
            f(x.abs() * 0.5 + 0.1)
        for name in names:
            _C._record_kernel(name, "collective", 0, 0, 0, 0, 0, 0)
        rows = [(n, t) for n, t, _ in _C._op_counts()]
        assert len(rows) == len(set(rows)), "a counter was created twice"
        counts = {n: c for n, t, c in _C._op_counts() if t == "collective"}
        assert all(counts[name] == 2 for name in names), counts
        print("ok")
    """)
    assert r.returncode == 0, (r.returncode, r.stdout[-2000:], r.stderr[-3000:])


class TestCopyFromDevices(TestCase):
    def test_copy_from_other_device_raises(self):
        ks = torch._C.DispatchKeySet(torch._C.DispatchKey.PrivateUse1)
        dst = torch.zeros(3, device="neuron")
        with self.assertRaises(RuntimeError) as cm:
            torch.ops.aten._copy_from.default.redispatch(ks, torch.empty(3, device="meta"), dst)
        self.assertExpectedInline(str(cm.exception).splitlines()[0], """neuron can copy only to and from CPU and neuron tensors, not from meta to neuron:0""")
        with self.assertRaises(RuntimeError):
            torch.ops.aten._copy_from.default.redispatch(ks, dst, torch.empty(3, device="meta"))
        src = torch.arange(3.0)
        torch.ops.aten._copy_from.default.redispatch(ks, src, dst)
        self.assertTrue(torch.equal(dst.cpu(), src))
