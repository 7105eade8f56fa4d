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

    def test_32x2_factor_follows_the_spread(self):
        # The 2.24 note's 32x2 cut applies to 64 ranks over 2 instances only: not to 64 ranks one per instance.
        old = cm.get_target("trn1").at_release("2.10")
        self.assertAlmostEqual(projection.collective_latency_factor(64, old, 2), 1 / 0.35)
        self.assertEqual(projection.collective_latency_factor(64, old, 64), 1.0)

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
