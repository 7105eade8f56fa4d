"""Collectives in the cost model: how a group spreads over instances (`instances`, nccom-test's -N), worked by
hand as in docs/cost_model.md ("Collectives: algorithms and latency floor"), and the errors of a spread the
runtime cannot form."""
from expecttest import TestCase

from torchneuron_ext import costmodel as cm
from torchneuron_ext.trainium import projection

MiB = 1 << 20


class TestGroupsOverInstances(TestCase):
    def test_default_packs_ranks_into_the_fewest_instances(self):
        trn1 = cm.get_target("trn1")
        self.assertEqual(projection.group_instances(32, trn1), 1)
        self.assertEqual(projection.group_instances(64, trn1), 2)
        self.assertEqual(projection.group_instances(2, trn1, 2), 2)
        # The same 2 x 32 group said explicitly projects as the default.
        packed = cm.collective("c10d::allreduce", 2 ** 30, 2 ** 30, 64, trn1)
        spread = cm.collective("c10d::allreduce", 2 ** 30, 2 ** 30, 64, trn1, instances=2)
        self.assertEqual(packed.duration_s, spread.duration_s)

    def test_one_rank_per_instance_all_reduce(self):
        # 2 ranks on 2 trn1 instances ("Communication Groups - Only One Rank per Node"): no intra-instance stage,
        # one EFA stage. 1 MiB is RDH's range (1 step a phase for 2 ranks): 2 x 15 us + 2 x 1/2 x 1 MiB at the
        # rank's 3.125 GB/s = 30 + 335.544 us, with trn1's floor (56.5 us) 422.044 us. Packed into one
        # instance the same group is 2 RDH steps over NeuronLink: 56.5 + 3 + 1 MiB / 48 GB/s = 81.345 us.
        trn1 = cm.get_target("trn1")
        stages = projection.collective_stages("c10d::allreduce", MiB, MiB, 2, trn1, instances=2)
        self.assertEqual([(s.algorithm, s.link, s.steps) for s in stages], [("rdh", "efa", 2)])
        p = cm.collective("c10d::allreduce", MiB, MiB, 2, trn1, instances=2)
        self.assertEqual(p.engine, "efa")
        self.assertAlmostEqual(p.duration_s * 1e6, 56.5 + 2 * 15 + MiB / 3.125e3, places=4)
        self.assertAlmostEqual(p.duration_s * 1e6, 422.044, places=3)
        self.assertAlmostEqual(cm.collective("c10d::allreduce", MiB, MiB, 2, trn1).duration_s * 1e6,
                               56.5 + 3 + MiB / 48e3, places=4)

    def test_all_to_all_v_across_two_instances(self):
        # nccom-test's all-to-all-v (Neuron 2.28, -r 2 -N 2, trn2 LNC=2): the metadata sends 512 and 1024 fp32, so
        # the slower rank sends 4 KiB to its peer: an all-to-all of 8 KiB, Mesh over EFA, one 15 us step and
        # 4 KiB at 6.25 GB/s, with trn2's floor: 99.6 + 15 + 0.655 = 115.255 us (measured 955 us: 0.12).
        t = cm.get_target("trn2").at_release("2.28")
        stages = projection.collective_stages("c10d::alltoall_base_", 6144, 8192, 2, t, instances=2)
        self.assertEqual([(s.algorithm, s.link, s.steps, s.wire_bytes) for s in stages], [("mesh", "efa", 1, 4096)])
        p = cm.collective("c10d::alltoall_base_", 6144, 8192, 2, t, instances=2)
        self.assertAlmostEqual(p.duration_s * 1e6, 99.6 + 15 + 4096 / 6.25e3, places=4)
        self.assertAlmostEqual(p.duration_s * 1e6, 115.255, places=3)

    def test_barrier_only_across_instances(self):
        # 64 ranks one per instance span instances as 2 x 32 do: both pay the 2.10 barrier; 32 ranks in one do not.
        old = cm.get_target("trn1").at_release("2.10")
        self.assertAlmostEqual(projection.collective_fixed_s(old, projection.group_instances(64, old, 64) > 1), 500e-6)
        self.assertAlmostEqual(projection.collective_fixed_s(old, projection.group_instances(32, old) > 1), 56.5e-6)

    def test_spread_errors(self):
        trn1 = cm.get_target("trn1")
        with self.assertRaises(ValueError) as e:
            cm.collective("c10d::allreduce", 8, 8, 64, trn1, instances=3)
        self.assertExpectedInline(str(e.exception), """a group of 64 ranks cannot spread evenly over 3 instances: the runtime forms groups with the same number of ranks on each instance; use a divisor of the group size""")
        with self.assertRaises(ValueError) as e:
            cm.collective("c10d::allreduce", 8, 8, 64, trn1, instances=1)
        self.assertExpectedInline(str(e.exception), """64 ranks over 1 instance puts 64 on each, more than the 32 ranks of a trn1 instance at LNC=1; use at least 2 instances""")
        with self.assertRaises(ValueError) as e:
            projection.collective_stages("c10d::allreduce", 8, 8, 64, trn1, instances=0)
        self.assertExpectedInline(str(e.exception), """instances=0: the number of instances a group spans is a positive integer""")


class TestCollectivesBarrier(TestCase):
    """Neuron 2.16's collectives library "improve[d] collectives barrier latency from 500us to 40us": a collective
    across instances pays the barrier in place of the floor where it is longer (COLLECTIVES_BARRIER)."""

    def test_two_instances_of_32_on_neuron_2_10(self):
        # nccom-test's 2 x 32 trn1 all-reduce of 8 bytes on Neuron 2.10: Ring stages (before 2.11), reduce-scatter
        # 31 x 1.5 us, the 2-rank all-reduce over EFA 2 x 15 us, all-gather 31 x 1.5 us, and the 500 us barrier
        # (longer than trn1's 56.5 us floor): 500 + 46.5 + 30 + 46.5 = 623.0 us (measured 520 us: 1.20).
        old = cm.get_target("trn1").at_release("2.10")
        p = cm.collective("c10d::allreduce", 8, 8, 64, old)
        self.assertEqual(p.engine, "efa")
        self.assertAlmostEqual(p.duration_s * 1e6, 500 + 46.5 + 30 + 46.5 + 8 * 31 / 32 * 2 / 48e3 + 8 / 32 / 3.125e3,
                               places=4)
        self.assertAlmostEqual(p.duration_s * 1e6, 623.0, places=1)
        # At 1 GiB the bytes dominate: 2 x 31/32 GiB at 48 GB/s + 32 MiB at 3.125 GB/s + 623 us = 54.70 ms
        # (measured 41.81 ms: 1.31).
        big = cm.collective("c10d::allreduce", 2 ** 30, 2 ** 30, 64, old)
        bytes_us = 2 * 31 / 32 * 2 ** 30 / 48e3 + 2 ** 25 / 3.125e3
        self.assertAlmostEqual(big.duration_s * 1e6, bytes_us + 623, places=2)
        self.assertAlmostEqual(big.duration_s * 1e3, 54.7016, places=3)

    def test_from_neuron_2_16_the_floor_is_longer(self):
        # From 2.16 the barrier is 40 us, under trn1's floor: the 2 x 32 all-reduce of 128 B on Neuron 2.21 is Mesh
        # inside each instance (1.5 us each way) and a Single-step Mesh over EFA (15 us) on the floor:
        # 56.5 + 18 = 74.5 us (aws-k8s-tester's run on Neuron 2.21 measured 55.89 us: 1.33).
        t = cm.get_target("trn1")
        self.assertAlmostEqual(projection.collective_fixed_s(t.at_release("2.15"), True), 500e-6)
        self.assertAlmostEqual(projection.collective_fixed_s(t.at_release("2.16"), True), 56.5e-6)
        self.assertAlmostEqual(projection.collective_fixed_s(t.at_release("2.10"), False), 56.5e-6)
        p = cm.collective("c10d::allreduce", 128, 128, 64, t.at_release("2.21"))
        self.assertAlmostEqual(p.duration_s * 1e6, 56.5 + 18 + 2 * 31 / 32 * 128 / 48e3 + 4 / 3.125e3, places=6)
        self.assertAlmostEqual(p.duration_s * 1e6, 74.5, places=1)
        # Inside an instance no barrier, on any release: 2.10's 2-rank all-reduce of 1 KiB is the floor and a
        # 2-step Ring (58 us measured).
        two = cm.collective("c10d::allreduce", 1024, 1024, 2, t.at_release("2.10"))
        self.assertAlmostEqual(two.duration_s * 1e6, 56.5 + 3 + 1024 / 48e3, places=4)
