"""Disagreeing, dead and stalled ranks: a clear error on the others, never a hang."""
from __future__ import annotations

import re

import expecttest
import pytest

from .launcher import run_ranks


def _scenario(name: str, timeout: float = 60, env: dict[str, str] | None = None) -> list:
    return run_ranks("tests.distributed.workers.faults", env={"TNX_SCENARIO": name, **(env or {})}, timeout=timeout)


class TestFaults(expecttest.TestCase):
    @pytest.fixture(autouse=True)
    def _job(self, neuron_job: list) -> None:
        self.mismatch = neuron_job  # the collectives job ends with the mismatch scenario

    def _messages(self, key: str) -> str:
        texts = {r.result[f"mismatch.{key}"] for r in self.mismatch}
        self.assertEqual(len(texts), 1, f"ranks saw different errors: {texts}")  # the same text on every rank
        return texts.pop()

    def test_shape_mismatch(self) -> None:
        self.assertExpectedInline(self._messages("shape"), """\
DistBackendError: neuron backend: the ranks of group '0' called mismatched collectives:
  rank 0: all_reduce(sum) float32[4, 4]
  rank 1: all_reduce(sum) float32[8]
Every rank must call the same collective, in the same order, with tensors of the same dtype and shape (for all_gather / reduce_scatter: the same per-rank chunk).""")

    def test_dtype_mismatch_of_equal_byte_size(self) -> None:
        self.assertExpectedInline(self._messages("dtype"), """\
DistBackendError: neuron backend: the ranks of group '0' called mismatched collectives:
  rank 0: all_reduce(sum) float32[4]
  rank 1: all_reduce(sum) int32[4]
Every rank must call the same collective, in the same order, with tensors of the same dtype and shape (for all_gather / reduce_scatter: the same per-rank chunk).""")

    def test_different_collectives(self) -> None:
        self.assertExpectedInline(self._messages("kind"), """\
DistBackendError: neuron backend: the ranks of group '0' called mismatched collectives:
  rank 0: all_reduce(sum) float32[4]
  rank 1: broadcast(root=0) float32[4]
Every rank must call the same collective, in the same order, with tensors of the same dtype and shape (for all_gather / reduce_scatter: the same per-rank chunk).""")

    def test_all_to_all_split_disagreement(self) -> None:
        self.assertExpectedInline(self._messages("splits"), """\
DistBackendError: neuron backend: all_to_all_single split sizes disagree across ranks of group '0':
  rank 1 sends 2 elements to rank 0, which expects 1
  rank 1 sends 0 elements to rank 1, which expects 1
rank i's input_split_sizes[j] must equal rank j's output_split_sizes[i] (in rows of dim 0).""")

    def test_all_gather_chunk_shapes(self) -> None:
        self.assertExpectedInline(self._messages("all_gather"), """\
DistBackendError: neuron backend: the ranks of group '0' called mismatched collectives:
  rank 0: all_gather_into_tensor float32[2, 3]
  rank 1: all_gather_into_tensor float32[3, 2]
Every rank must call the same collective, in the same order, with tensors of the same dtype and shape (for all_gather / reduce_scatter: the same per-rank chunk).""")

    def test_reduce_scatter_single_input_identical_shapes(self) -> None:
        self.assertExpectedInline(self._messages("rs_identical"), """RuntimeError: neuron backend: reduce_scatter of a single input tensor (input_list=[x]): when input and output shapes are identical, replica group must have size 1, got 2. Pass one input per rank, or an input whose shape is the output's with one dimension multiplied by the group size.""")

    def test_reduce_scatter_single_input_wrong_ratio(self) -> None:
        self.assertExpectedInline(self._messages("rs_ratio"), """RuntimeError: neuron backend: reduce_scatter of a single input tensor (input_list=[x]): scatter dimension 0: input size (8) must be evenly divisible by replica group size (2) into the output's (3); expected output size 4, or an input of size 6.""")

    def test_reduce_scatter_input_count(self) -> None:
        self.assertExpectedInline(self._messages("rs_count"), """RuntimeError: neuron backend: reduce_scatter takes one input per rank of the group (2) or a single input holding every rank's block; got 3 inputs""")

    def test_reduce_scatter_tensor_sizes(self) -> None:
        self.assertExpectedInline(self._messages("rst_size"), """RuntimeError: neuron backend: reduce_scatter_tensor: scatter dimension 0 of the flattened tensors: input size (21) must be evenly divisible by replica group size (2), but 21 / 2 = 10.5. Expected output size: 10.5, actual output size: 10. The input must hold group size x the output's elements.""")

    def test_all_to_all_list_lengths(self) -> None:
        self.assertExpectedInline(self._messages("a2a_count"), """RuntimeError: neuron backend: all_to_all: the number of input tensors (1) and of output tensors (2) must equal world size (2): one tensor to and from each rank""")

    def test_all_gather_coalesced_torchneuron_layout(self) -> None:
        self.assertExpectedInline(self._messages("agc_layout"), """RuntimeError: neuron backend: all_gather_coalesced takes its outputs as PyTorch documents them, one list per rank holding one tensor per input (output_tensor_lists[rank][input]: 2 lists of 3); got 3 lists of 2, TorchNeuron's [input][rank] layout, which is not taken because with as many inputs as ranks the two layouts cannot be told apart""")

    def test_async_mismatch_raises_at_the_call(self) -> None:
        self.assertIn("mismatched collectives", self._messages("async_shape"))

    def test_group_usable_after_errors(self) -> None:
        self.assertEqual(self._messages("after"), "[3.0, 3.0, 3.0]")

    def test_dead_peer_raises_quickly(self) -> None:
        rank0, rank1 = _scenario("dead_peer", timeout=60, env={"TNX_TIMEOUT": "30"})
        self.assertEqual(rank1.returncode, 3)
        self.assertEqual(rank0.returncode, 0, rank0.output[-3000:])
        message = rank0.result["error"]
        self.assertTrue(message.startswith("DistBackendError: neuron backend: "), message)
        self.assertIn("A peer process may have exited", message)
        self.assertLess(float(rank0.result["seconds"]), 30)  # well before the group's timeout

    def test_stalled_peer_raises_at_the_timeout(self) -> None:
        rank0, _ = _scenario("stalled_peer", timeout=60, env={"TNX_TIMEOUT": "3"})
        self.assertEqual(rank0.returncode, 0, rank0.output[-3000:])
        message = rank0.result["error"]
        self.assertTrue(message.startswith("DistBackendError: neuron backend: "), message)
        self.assertRegex(message, re.compile("time", re.IGNORECASE))
        self.assertLess(float(rank0.result["seconds"]), 12)


if __name__ == "__main__":
    import unittest
    unittest.main()
