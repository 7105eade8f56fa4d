"""The boxed generic path (csrc/aten/generic_fallback.cpp): what it records must come from the call's own
arguments, not from the dispatcher's stack, which the CPU kernel pops and overwrites with its results."""
from tests.conftest import run_python


def test_flops_of_a_boxed_matmul_come_from_its_arguments():
    # No aten matmul overload reaches the boxed path today (each has a native kernel), so the test defines
    # one: aten::mm.<new overload> has the name estimate_flops knows and no neuron kernel. The FLOPs were
    # read from the stack after the kernel, i.e. from its result (or freed values): a crash or 2*m*n*n.
    r = run_python("""
        import torch, torchneuron_ext
        from torchneuron_ext.profiler import op_stats, timing
        lib = torch.library.Library("aten", "FRAGMENT")
        lib.define("mm.neuron_boxed_test(Tensor self, Tensor mat2) -> Tensor")
        lib.impl("mm.neuron_boxed_test", lambda a, b: torch.mm(a, b), "CPU")
        a, b = torch.randn(8, 3), torch.randn(3, 5)
        with timing():
            out = torch.ops.aten.mm.neuron_boxed_test(a.to("neuron"), b.to("neuron"))
        torch.testing.assert_close(out.cpu(), a @ b)
        stat = next(s for s in op_stats() if s.name == "aten::mm.neuron_boxed_test")
        print(stat.tier, stat.calls_timed, stat.flops)
    """, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["generic", "1", str(2 * 8 * 3 * 5)]
