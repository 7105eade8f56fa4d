"""Custom ops as PyTorch operators: neuron and CPU kernels, Meta kernels, devices, outputs, tracking."""
from __future__ import annotations

import expecttest
import pytest
import torch

import torchneuron_ext


@pytest.fixture(autouse=True)
def _library(test_ops):
    return test_ops


ops = torch.ops.test_ops


class TestKernels(expecttest.TestCase):
    def test_scalar_arguments_on_neuron_and_cpu(self):
        x = torch.randn(17)
        expected = -x * 2.5 + 3
        for device in ("neuron", "cpu"):
            y = ops.affine(x.to(device), 2.5, 3, True)
            self.assertEqual(y.device.type, device)
            torch.testing.assert_close(y.cpu(), expected)
        torch.testing.assert_close(ops.affine(x.neuron(), 0.5, -1, False).cpu(), x * 0.5 - 1)

    def test_several_outputs(self):
        x = torch.randn(5, 7)
        pos, neg = ops.split_sign(x.neuron())
        self.assertEqual((pos.device, neg.device), (torch.device("neuron:0"),) * 2)
        self.assertTrue(torch.equal(pos.cpu(), x.clamp(min=0)))
        self.assertTrue(torch.equal(neg.cpu(), x.clamp(max=0)))

    def test_strided_inputs(self):
        a = torch.randn(40, 30)
        b = torch.randn(30, 40).t()  # not contiguous: streams walk its strides
        self.assertTrue(torch.equal(ops.stream_add(a.neuron(), b.neuron()).cpu(), a + b))

    def test_second_core(self):
        x = torch.randn(6, device="neuron:1")
        y = ops.affine(x, 1.0, 1, False)
        self.assertEqual(y.device, torch.device("neuron:1"))
        torch.testing.assert_close(y.cpu(), x.cpu() + 1)

    def test_output_is_device_memory(self):
        x = torch.randn(1 << 16, device="neuron")
        before = torch.neuron.memory_allocated()
        y = ops.affine(x, 1.0, 0, False)
        self.assertGreaterEqual(torch.neuron.memory_allocated() - before, y.numel() * 4)

    def test_output_is_a_fresh_tensor(self):
        x = torch.randn(8, device="neuron")
        y = ops.passthrough(x)  # the kernel returns its input
        self.assertNotEqual(y.data_ptr(), x.data_ptr())
        self.assertTrue(torch.equal(y.cpu(), x.cpu()))

    def test_counted_in_the_custom_tier(self):
        torchneuron_ext.clear_op_tracking()
        ops.affine(torch.ones(3, device="neuron"), 1.0, 0, False)
        self.assertEqual(torchneuron_ext.get_op_counts()["test_ops::affine"], {"custom": 1})
        self.assertNotIn("test_ops::affine", torchneuron_ext.get_fallback_ops())

    def test_opcheck(self):
        for device in ("neuron", "cpu"):
            x = torch.randn(4, 5, device=device)
            for op, args in [(ops.affine.default, (x.flatten(), 2.0, 3, True)), (ops.split_sign.default, (x,)),
                             (ops.stream_add.default, (x, x))]:
                result = torch.library.opcheck(op, args)
                self.assertEqual(set(result.values()), {"SUCCESS"}, f"{op} on {device}: {result}")


class TestShapeFunctions(expecttest.TestCase):
    def test_meta_kernel(self):
        x = torch.empty(3, 4, device="meta")
        pos, neg = ops.split_sign(x)
        self.assertEqual((pos.shape, pos.dtype, pos.device.type), (torch.Size([3, 4]), torch.float32, "meta"))
        budget = ops.tcm_budget(x)
        self.assertEqual((budget.shape, budget.dtype), (torch.Size([7]), torch.int64))

    def test_fake_tensors_on_neuron(self):
        with torch._subclasses.FakeTensorMode():
            x = torch.empty(2, 9, device="neuron")
            y = ops.affine(x, 1.0, 2, False)
        self.assertEqual((y.shape, y.device), (torch.Size([2, 9]), torch.device("neuron:0")))

    def test_kernel_must_agree_with_its_shape_function(self):
        with self.assertRaises(RuntimeError) as cm:
            ops.wrong_shape(torch.ones(10, device="neuron"))
        self.assertExpectedInline(str(cm.exception).splitlines()[0], """\
test_ops::wrong_shape: kernel wrong_shape returned a Float tensor of shape [11], but shape function same_shape says a Float tensor of shape [10]; the two must agree (FakeTensor and torch.compile use the shape function)""")


class TestDevices(expecttest.TestCase):
    def test_neuron_and_cpu_tensors(self):
        with self.assertRaises(RuntimeError) as cm:
            ops.stream_add(torch.ones(3, device="neuron"), torch.ones(3))
        self.assertExpectedInline(str(cm.exception), """Expected all tensors to be on the same device, but found at least two devices, neuron:0 and cpu! (when checking arguments for test_ops::stream_add: a non-scalar tensor is on cpu device, expected neuron). Move them to one device first, e.g. with .to("neuron:0").""")

    def test_two_neuron_cores(self):
        with self.assertRaises(RuntimeError) as cm:
            ops.stream_add(torch.ones(3, device="neuron:0"), torch.ones(3, device="neuron:1"))
        self.assertExpectedInline(str(cm.exception), """Expected all tensors to be on the same device, but found at least two devices, neuron:0 and neuron:1! (when checking arguments for test_ops::stream_add: a tensor is on neuron:1 device, expected neuron:0). Move them to one device first, e.g. with .to("neuron:0").""")

    def test_wrong_dtype(self):
        with self.assertRaises(RuntimeError) as cm:
            ops.stream_add(torch.ones(3, device="neuron", dtype=torch.float64), torch.ones(3, device="neuron"))
        self.assertExpectedInline(str(cm.exception).splitlines()[0], """\
read_stream_accessor<Float>: the tensor holds Double elements""")


if __name__ == "__main__":
    pytest.main([__file__])
