"""The emulated GPSIMD helpers: stream and TCM accessors, the TCM budget, get_dst_tensor(),
coherence policies, multicore get_cpu_id() / get_cpu_count(), and the rules they enforce."""
from __future__ import annotations

import os
import re
import signal
import time
import warnings

import expecttest
import pytest
import torch

ops = torch.ops.test_ops
mc = torch.ops.test_mc


def first_line(fn, *args) -> str:
    try:
        fn(*args)
    except RuntimeError as e:
        return str(e).splitlines()[0]
    raise AssertionError("no error")


class TestSingleCore(expecttest.TestCase):
    @pytest.fixture(autouse=True)
    def _library(self, test_ops):
        pass

    def test_tcm_accessor_and_get_dst_tensor(self):
        x = torch.randn(2500)  # three TCM chunks of 1000 elements
        self.assertTrue(torch.equal(ops.tcm_negate(x.neuron()).cpu(), -x))
        self.assertTrue(torch.equal(ops.tcm_negate(x), -x))

    def test_tcm_budget(self):
        budget = ops.tcm_budget(torch.ones(4, device="neuron")).cpu().tolist()
        self.assertEqual(dict(zip([
            "4 KiB blocks", "4 KiB blocks beside a stream accessor", "16 KiB at once", "16 KiB + 1 at once",
            "4 KiB blocks after freeing one of four", "get_cpu_id()", "get_cpu_count()"], budget)), {
            "4 KiB blocks": 4, "4 KiB blocks beside a stream accessor": 3, "16 KiB at once": 1,
            "16 KiB + 1 at once": 0, "4 KiB blocks after freeing one of four": 1, "get_cpu_id()": 0,
            "get_cpu_count()": 1})

    def test_streams_longer_than_their_tcm_buffer(self):
        a, b = torch.randn(3000), torch.randn(3000)  # 12 KB each: the 4 KiB buffers refill
        self.assertTrue(torch.equal(ops.stream_add(a.neuron(), b.neuron()).cpu(), a + b))

    def test_coherent_policy_refuses_a_writer_beside_a_reader(self):
        self.assertExpectedInline(first_line(ops.coherence, torch.ones(4, device="neuron"), 0), """\
kernel coherence of test_ops::coherence: potentially incoherent access: opening a write stream accessor on a tensor that already has open read stream accessors (stream accessors cache data in TCM; close() the other accessor first, or allow it with t.set_accessor_coherence_policy(torch::CoherencyEnforcer::INCOHERENT_VERBOSE or INCOHERENT_QUIET))""")

    @pytest.fixture(autouse=True)
    def _capfd(self, capfd):
        self.capfd = capfd

    def warned(self, fn, *args) -> tuple[torch.Tensor, bool]:
        """fn's result, and whether it warned (a C++ warning is printed, or raised as a Python warning)."""
        self.capfd.readouterr()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = fn(*args)
        text = self.capfd.readouterr().err + "".join(str(w.message) for w in caught)
        return result, "potentially incoherent access" in text

    def test_incoherent_policies(self):
        x = torch.arange(6, dtype=torch.float32)
        verbose, verbose_warned = self.warned(ops.coherence, x.neuron(), 1)
        quiet, quiet_warned = self.warned(ops.coherence, x.neuron(), 2)
        self.assertEqual((verbose_warned, quiet_warned), (True, False))
        for y in (verbose, quiet):
            self.assertTrue(torch.equal(y.cpu(), x * 2))

    def test_misuse(self):
        x = torch.ones(10, device="neuron")
        messages = [re.sub(r"0x[0-9a-f]+", "<address>", first_line(ops.misuse, x, what)) for what in range(7)]
        self.assertExpectedInline("\n".join(messages), """\
tensor_to_tcm: 16 bytes at the TCM pointer are not inside one block from torch::neuron::tcm_malloc on this core (TCM holds 16384 bytes per GPSIMD core)
read() past the end of a read stream: the tensor has 10 elements
read_stream_accessor<Double>: the tensor holds Float elements
torch::neuron::tcm_free(<address>): not a block from torch::neuron::tcm_malloc on this core, or already freed
tensor_to_tcm: 32 bytes at the TCM pointer are not inside one block from torch::neuron::tcm_malloc on this core (TCM holds 16384 bytes per GPSIMD core)
tensor_to_tcm: elements [8, 12) are outside the tensor's 10 elements
the kernel refuses: what=6""")

    def test_errors_leave_the_device_usable(self):
        x = torch.ones(10, device="neuron")
        for what in range(7):
            with self.assertRaises(RuntimeError):
                ops.misuse(x, what)
        # the TCM of the failed launches was released: the whole budget is there
        self.assertEqual(ops.tcm_budget(x).cpu().tolist()[0], 4)


class TestMulticore(expecttest.TestCase):
    @pytest.fixture(autouse=True)
    def _library(self, test_mc):
        self.library = test_mc

    def test_library_is_multicore(self):
        self.assertTrue(self.library.multicore)

    def test_cores_split_the_work(self):
        x = torch.randn(10001)  # not a multiple of 8: the last core takes the rest
        self.assertTrue(torch.equal(mc.relu(x.neuron()).cpu(), x.relu()))
        self.assertTrue(torch.equal(mc.relu(x), x.relu()))

    def test_eight_cores_on_eight_threads(self):
        rows = mc.cores(torch.ones(1, device="neuron")).cpu()
        self.assertEqual(rows[:, 0].tolist(), list(range(8)))
        self.assertEqual(rows[:, 1].tolist(), [8] * 8)
        self.assertEqual(len(set(rows[:, 2].tolist())), 8)

    def test_output_must_come_from_get_dst_tensor(self):
        self.assertExpectedInline(first_line(mc.no_dst, torch.ones(4, device="neuron")), """\
test_mc::no_dst: multicore kernel mc_no_dst never called get_dst_tensor(); in multicore mode every core writes its part of the output through get_dst_tensor()""")

    def test_forked_child_gets_its_own_cores(self):
        x = torch.randn(100)
        mc.relu(x)  # the parent's 8 core threads exist now; a forked child has none of them
        pid = os.fork()
        if pid == 0:  # the child: must not wait for its parent's threads
            try:
                os._exit(0 if torch.equal(mc.relu(x), x.relu()) else 1)
            finally:
                os._exit(2)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                self.assertEqual(os.waitstatus_to_exitcode(status), 0)
                return
            time.sleep(0.05)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        self.fail("the forked child hung in a multicore launch")

    def test_stream_accessors_are_single_core(self):
        self.assertExpectedInline(first_line(mc.stream, torch.ones(4, device="neuron")), """\
read_stream_accessor() in kernel mc_stream: stream accessors work in single-core kernels only; a multicore kernel must use tcm_accessor()""")


if __name__ == "__main__":
    pytest.main([__file__])
