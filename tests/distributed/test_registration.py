"""The backend's registration, per-rank core selection and options, in one process."""
from __future__ import annotations

import datetime

import expecttest
import torch
import torch.distributed as dist

from torchneuron_ext import distributed as nd
from torchneuron_ext.distributed.rank_device import select_rank_core


class TestRegistration(expecttest.TestCase):
    def test_backend_is_registered_for_neuron(self) -> None:
        self.assertIn("neuron", dist.Backend.backend_list)
        self.assertEqual(dist.Backend.default_device_backend_map["neuron"], "neuron")
        self.assertEqual(dist.Backend.backend_capability["neuron"], ["neuron", "cpu"])
        nd.register()  # idempotent
        self.assertEqual(dist.Backend.backend_list.count("neuron"), 1)

    def test_core_from_local_rank(self) -> None:
        env = {"LOCAL_RANK": "1"}
        self.assertEqual(select_rank_core(env), "1")
        self.assertEqual(env["NEURON_RT_VISIBLE_CORES"], "1")

    def test_explicit_core_choice_wins(self) -> None:
        env = {"LOCAL_RANK": "1", "NEURON_RT_VISIBLE_CORES": "2-3"}
        self.assertEqual(select_rank_core(env), "2-3")
        # A core count does not stop it: each process of a distributed job owns one core, as on TorchNeuron.
        env = {"LOCAL_RANK": "1", "NEURON_RT_NUM_CORES": "2"}
        self.assertEqual(select_rank_core(env), "1")
        self.assertIsNone(select_rank_core({}))

    def test_bad_local_rank(self) -> None:
        with self.assertRaises(ValueError) as e:
            select_rank_core({"LOCAL_RANK": "x"})
        self.assertExpectedInline(str(e.exception),
                                  """LOCAL_RANK='x' is not a non-negative integer; torchrun sets it per worker""")

    def test_checks_env(self) -> None:
        import os
        old = os.environ.get("TORCHNEURON_EXT_DIST_CHECKS")
        try:
            os.environ["TORCHNEURON_EXT_DIST_CHECKS"] = "0"
            self.assertFalse(nd.checks_enabled_by_default())
            # The package's one switch grammar (_env.flag): "true" raised and "false" was refused before.
            for value, on in (("false", False), ("off", False), ("true", True), ("yes", True), ("1", True)):
                os.environ["TORCHNEURON_EXT_DIST_CHECKS"] = value
                self.assertEqual(nd.checks_enabled_by_default(), on, value)
            os.environ["TORCHNEURON_EXT_DIST_CHECKS"] = ""
            self.assertTrue(nd.checks_enabled_by_default())
            os.environ["TORCHNEURON_EXT_DIST_CHECKS"] = "maybe"
            with self.assertRaises(ValueError) as e:
                nd.checks_enabled_by_default()
            self.assertExpectedInline(str(e.exception), """TORCHNEURON_EXT_DIST_CHECKS='maybe' is not understood: use 1 (or true/on/yes) to turn it on, 0 (or false/off/no) to turn it off""")
        finally:
            os.environ.pop("TORCHNEURON_EXT_DIST_CHECKS")
            if old is not None:
                os.environ["TORCHNEURON_EXT_DIST_CHECKS"] = old


class TestSingleRankGroup(expecttest.TestCase):
    """A world of one, in this process: options, errors and host-side behaviour."""

    @classmethod
    def setUpClass(cls) -> None:
        dist.init_process_group("neuron", store=dist.HashStore(), rank=0, world_size=1,
                                timeout=datetime.timedelta(seconds=30))

    @classmethod
    def tearDownClass(cls) -> None:
        dist.destroy_process_group()

    def test_backend_object(self) -> None:
        backend = dist.group.WORLD._get_backend(torch.device("neuron"))
        self.assertIsInstance(backend, nd.ProcessGroupNeuron)
        self.assertTrue(backend.checks_enabled)
        self.assertIsInstance(backend.transport, dist.ProcessGroupGloo)
        self.assertIs(dist.group.WORLD._get_backend(torch.device("cpu")).__class__, nd.ProcessGroupNeuron)

    def test_options(self) -> None:
        group = dist.new_group([0], backend="neuron", pg_options=nd.NeuronOptions(check_signatures=False))
        self.assertFalse(group._get_backend(torch.device("neuron")).checks_enabled)
        with self.assertRaises(TypeError) as e:
            dist.new_group([0], backend="neuron", pg_options={"check_signatures": False})
        self.assertExpectedInline(str(e.exception), """\
the neuron backend takes pg_options=torchneuron_ext.distributed.NeuronOptions(...), got dict""")

    def test_results_stay_on_the_device_and_in_place(self) -> None:
        t = torch.arange(6.0, device="neuron")
        ptr = t.data_ptr()
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        self.assertEqual(t.device.type, "neuron")
        self.assertEqual(t.data_ptr(), ptr)
        torch.testing.assert_close(t.cpu(), torch.arange(6.0))

    def test_non_contiguous_tensor(self) -> None:
        # gloo alone would exchange the wrong elements of a strided view, silently.
        t = torch.zeros(4, 4, device="neuron")[:, ::2]
        with self.assertRaises(RuntimeError) as e:
            dist.all_reduce(t)
        self.assertExpectedInline(str(e.exception).splitlines()[0], """neuron backend: all_reduce takes contiguous tensors; got one of shape [4, 2] with strides [4, 2]. Pass t.contiguous() (and copy the result back if you need it in the original tensor).""")

    def test_timing_counts_collectives(self) -> None:
        import torchneuron_ext.profiler as tp
        with tp.timing():
            dist.broadcast(torch.ones(8, device="neuron"), src=0)
            stats = {s.name: s for s in tp.op_stats()}
        self.assertEqual(stats["c10d::broadcast"].tier, "collective")
        self.assertEqual(stats["c10d::broadcast"].bytes_read, 32)


_LAYOUT_ERRORS = r"""
import os, warnings
import torch, torch.distributed as dist
def init():
    dist.init_process_group("neuron", store=dist.HashStore(), rank=0, world_size=1)
try:
    init()
except RuntimeError as e:
    print(e)
torch.ones(1, device="neuron")  # the runtime starts with both cores, numbered from neuron:0
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    init()
print(*[str(w.message) for w in caught if "init_process_group" in str(w.message)])
print(torch.neuron.device_count(), torch.ones(1, device="neuron:1").device)
"""


class TestRankDeviceErrors(expecttest.TestCase):
    def test_two_cores_for_one_rank_then_runtime_started_first(self) -> None:
        import os
        import subprocess
        import sys
        env = {k: v for k, v in os.environ.items() if not k.startswith(("NEURON_RT_", "LOCAL_"))}
        env.update(NEURON_RT_VISIBLE_CORES="0,1", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1")
        proc = subprocess.run([sys.executable, "-c", _LAYOUT_ERRORS], env=env, capture_output=True, text=True,
                              timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        self.assertExpectedInline(proc.stdout, """\
Attempted to have more than one device per process in distributed setup: NEURON_RT_VISIBLE_CORES='0,1' gives rank 0 2 NeuronCores. Each process of a distributed job owns one core; give each rank one core id, or leave NEURON_RT_VISIBLE_CORES unset and each rank takes the core of its LOCAL_RANK.
neuron: the runtime started before init_process_group(backend='neuron'), so this process keeps its NeuronCores numbered neuron:0 to neuron:1 instead of owning neuron:0 alone. TorchNeuron refuses this order; create neuron tensors and call torch.neuron functions after init_process_group.
2 neuron:1
""")
