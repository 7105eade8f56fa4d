"""Registers and loops the device runs (issue 29): nisa.register_alloc/move/load/store, VirtualRegister,
nl.dynamic_range, nl.fori_loop, nl.while_loop and ``while reg:``, with register values used as dynamic
offsets. The kernels follow AWS's documented examples; results are checked against numpy."""
from __future__ import annotations

import numpy as np
import pytest
from expecttest import TestCase

import torchneuron_ext.nki as nki
import torchneuron_ext.nki.isa as nisa
import torchneuron_ext.nki.language as nl
from torchneuron_ext.nki import NKIError


def f32(*shape: int) -> np.ndarray:
    return np.random.default_rng(1).standard_normal(shape).astype(np.float32)


def i32(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int32).reshape(1, -1)


def _scalar_sbuf(src):
    """A one-element HBM tensor copied into a (1, 1) SBUF tile."""
    t = nl.ndarray((1, 1), dtype=src.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=src)
    return t


# ---------------------------------------------------------------------------------------------------------
# registers
# ---------------------------------------------------------------------------------------------------------

def test_registers_move_load_and_store() -> None:
    @nki.jit
    def k(x):
        out = nl.ndarray((1, 5), dtype=nl.int32, buffer=nl.shared_hbm)
        a = nisa.register_alloc(7)
        b = nisa.register_alloc()
        nisa.register_move(b, a)
        c = nisa.register_alloc(None)
        nisa.register_load(c, _scalar_sbuf(x))
        d = nisa.register_alloc()
        nisa.register_move(d, 2 ** 32 - 1)  # 32 bits, two's complement: -1
        e = nisa.register_alloc(_scalar_sbuf(x)[0, 0])  # initialised from a one-element tensor
        for i, r in enumerate((a, b, c, d, e)):
            nisa.register_store(out[0:1, i:i + 1], r)
        return out

    np.testing.assert_array_equal(k(i32(-42)), [[7, 7, -42, -1, -42]])


def test_register_is_not_a_python_int() -> None:
    seen = {}

    @nki.jit
    def k(x):
        r = nisa.register_alloc(3)
        for convert in (int, range, lambda v: [0, 1, 2, 3][v]):
            with pytest.raises(TypeError, match="only known on the device"):
                convert(r)
        seen["repr"] = repr(r)
        seen["isinstance"] = isinstance(r, nisa.VirtualRegister)
        return x

    k(i32(0))
    assert seen == {"repr": "VirtualRegister(3)", "isinstance": True}


# ---------------------------------------------------------------------------------------------------------
# loops
# ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n_tiles", [0, 1, 3])
def test_dynamic_range_with_a_register_bound(n_tiles: int) -> None:
    """AWS's dynamic-shape pattern: the trip count comes from a tensor, the row offset from an SBUF counter."""
    @nki.jit
    def k(a, n):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=nl.zeros(a.shape, dtype=a.dtype, buffer=nl.sbuf))
        trip = nisa.register_alloc()
        nisa.register_load(trip, _scalar_sbuf(n))
        row = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.memset(dst=row, value=0)
        for _ in nl.dynamic_range(0, trip, 1):
            t = nl.ndarray((4, 8), dtype=a.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=a.ap(pattern=[[8, 4], [1, 8]], offset=0, scalar_offset=row, indirect_dim=0))
            nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
            nisa.dma_copy(dst=out.ap(pattern=[[8, 4], [1, 8]], offset=0, scalar_offset=row, indirect_dim=0), src=t)
            nisa.tensor_scalar(dst=row, data=row, op0=nl.add, operand0=4)
        return out

    a = f32(12, 8)
    ref = np.zeros_like(a)
    ref[:4 * n_tiles] = 2 * a[:4 * n_tiles]
    np.testing.assert_array_equal(k(a, i32(n_tiles)), ref)


def test_dynamic_range_hands_the_body_its_value_as_a_register() -> None:
    """nki-dynamic-loops.rst: start and stop registers, a step of 2, the loop value used as scalar_offset."""
    @nki.jit
    def k(a):
        out = nl.ndarray((3, 8), dtype=a.dtype, buffer=nl.shared_hbm)
        begin, end = nisa.register_alloc(1), nisa.register_alloc(6)
        j = 0
        for i in nl.dynamic_range(begin, end, 2):
            assert isinstance(i, nisa.VirtualRegister)
            t = nl.ndarray((1, 8), dtype=a.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=a.ap(pattern=[[8, 1], [1, 8]], scalar_offset=i, indirect_dim=0))
            nisa.dma_copy(dst=out[j:j + 1, :], src=t)
            j += 1
        return out

    a = f32(8, 8)
    np.testing.assert_array_equal(k(a), a[[1, 3, 5]])


def test_fori_loop_follows_awss_example() -> None:
    """nl.fori_loop's docstring: copy data[0, i] to output[0, i] for i below a bound loaded at run time."""
    @nki.jit
    def k(data, ub_input):
        n = data.shape[1]
        output = nl.ndarray((1, n), dtype=nl.float32, buffer=nl.shared_hbm)
        ub_reg = nisa.register_alloc()
        nisa.register_load(ub_reg, _scalar_sbuf(ub_input))
        zeros = nl.zeros((1, n), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=output, src=zeros)
        temp = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)

        def body(i):
            nisa.dma_copy(dst=temp, src=data.ap([[1, 1], [1, 1]], scalar_offset=i, indirect_dim=1))
            nisa.dma_copy(dst=output.ap([[1, 1], [1, 1]], scalar_offset=i, indirect_dim=1), src=temp)

        assert nl.fori_loop(0, ub_reg, body) is None
        return output

    data = f32(1, 10)
    ref = np.zeros_like(data)
    ref[0, :6] = data[0, :6]
    np.testing.assert_array_equal(k(data, i32(6)), ref)


def test_while_loop_follows_awss_example() -> None:
    """nl.while_loop's docstring: add val to acc while a counter loaded into the condition register is
    non-zero."""
    @nki.jit
    def k(data, count_input):
        val = _scalar_sbuf(data)
        acc = nl.zeros((1, 1), dtype=nl.float32, buffer=nl.sbuf)
        count_sb = _scalar_sbuf(count_input)
        one_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.memset(dst=one_sb, value=1)
        reg = nisa.register_alloc()
        nisa.register_load(reg, count_sb)

        def body(r):
            nisa.tensor_tensor(dst=acc, data1=acc, data2=val, op=nl.add)
            nisa.tensor_tensor(dst=count_sb, data1=count_sb, data2=one_sb, op=nl.subtract)
            nisa.register_load(r, count_sb)
            return r

        nl.while_loop(reg, body)
        out = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=acc)
        return out

    assert k(np.full((1, 1), 1.5, np.float32), i32(4))[0, 0] == 6.0
    assert k(np.full((1, 1), 1.5, np.float32), i32(0))[0, 0] == 0.0  # a true while: zero runs no iteration


def test_while_on_a_register() -> None:
    @nki.jit
    def k(x):
        out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
        count = _scalar_sbuf(x)
        reg = nisa.register_alloc(1)
        steps = nisa.register_alloc(0)
        n = 0
        while reg:
            nisa.tensor_scalar(dst=count, data=count, op0=nl.subtract, operand0=1)
            nisa.register_load(reg, count)
            n += 1
        nisa.register_move(steps, n)
        nisa.register_store(out, steps)
        return out

    assert k(i32(5))[0, 0] == 5


# ---------------------------------------------------------------------------------------------------------
# restrictions
# ---------------------------------------------------------------------------------------------------------

class TestMessages(TestCase):
    def message(self, body, *args) -> str:
        @nki.jit
        def k(x):
            body(x)
            return x

        with self.assertRaises((NKIError, TypeError)) as ctx:
            k(*(args or (i32(3),)))
        return str(ctx.exception).splitlines()[0]

    def test_register_step_is_refused(self):
        def body(x):
            for _ in nl.dynamic_range(0, 4, nisa.register_alloc(1)):
                pass
        self.assertExpectedInline(self.message(body), """\
nl.dynamic_range: the step must be a compile-time positive integer (the hardware loop instruction encodes it as an immediate), got a VirtualRegister [err_dynamic_loop_step]""")

    def test_non_positive_step_is_refused(self):
        self.assertExpectedInline(self.message(lambda x: nl.fori_loop(0, 4, lambda i: None, step=0)), """\
nl.fori_loop: the step must be a compile-time positive integer, got 0 [err_dynamic_loop_step]""")

    def test_uninitialised_register(self):
        self.assertExpectedInline(self.message(lambda x: nl.fori_loop(0, nisa.register_alloc(), lambda i: None)), """\
nl.fori_loop(upper=...) reads a register that was never written: initialise it with nisa.register_alloc(value), register_move or register_load [err_uninitialized_register]""")

    def test_register_load_needs_one_integer(self):
        def from_floats(x):
            nisa.register_load(nisa.register_alloc(), nl.zeros((1, 1), dtype=nl.float32, buffer=nl.sbuf))
        self.assertExpectedInline(self.message(from_floats), """\
'src' of nki.isa.register_load must hold an integer of up to 32 bits, got float32 [err_unsupported_dtype]""")
        three = i32(1, 2, 3)
        self.assertExpectedInline(self.message(lambda x: nisa.register_load(nisa.register_alloc(), x), three), """\
'src' of nki.isa.register_load must hold exactly one element (shape [1] or [1, 1]), got shape (1, 3) [err_shape_mismatch]""")

    def test_register_arguments_are_registers(self):
        self.assertExpectedInline(self.message(lambda x: nisa.register_move(5, 3)), """\
'dst' of nki.isa.register_move must be a VirtualRegister (nisa.register_alloc()), got int""")
        self.assertExpectedInline(self.message(lambda x: nisa.register_alloc(1.5)), """\
nki.isa.register_alloc: a register holds an integer immediate, got 1.5""")

    def test_while_loop_body_returns_the_condition(self):
        self.assertExpectedInline(self.message(lambda x: nl.while_loop(nisa.register_alloc(1), lambda r: None)), """\
nl.while_loop: body_fun must return the next condition as a VirtualRegister, got NoneType""")

    def test_register_value_range(self):
        self.assertExpectedInline(self.message(lambda x: nisa.register_alloc(2 ** 40)), """\
nki.isa.register_alloc: 1099511627776 does not fit a 32-bit register [err_register_value_out_of_range]""")
