"""The worked examples of docs/cost_model.md ("Worked examples") and the LLM decode rows of the validation table
(bench/costmodel_rows/llm.py): their code paths on toy configs, and the arithmetic they rest on, worked by hand."""
from __future__ import annotations

import os
import sys

import pytest

import torchneuron_ext  # noqa: F401
from torchneuron_ext import costmodel
from torchneuron_ext.profiler.dry_run import MemoryReport

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# On sys.path only while they are imported: examples/ holds an `nki/` folder, which on the path for the rest
# of the session would stand for AWS's `nki` package (tests/compat's aliases then defer to it).
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "examples"))
try:
    import dry_run_llama  # noqa: E402
    import tp_decode_llama  # noqa: E402
finally:
    sys.path.remove(os.path.join(ROOT, "examples"))


@pytest.mark.parametrize("heads, kv, tp, expected", [
    (32, 32, 32, (32, 32)),   # Llama-2-7b at TP 32: one head each
    (40, 40, 32, (64, 64)),   # Llama-2-13b at TP 32: padded to 2 heads each
    (40, 40, 24, (48, 48)),   # ... at TP 24
    (32, 8, 24, (48, 24)),    # Llama-3-8B at TP 24: 2 query heads and 1 replicated K/V head each
    (64, 8, 32, (64, 32)),    # 70B at TP 32: 2 query heads, 1 K/V head each (replicated 4x)
    (64, 8, 24, (72, 24)),    # 70B at TP 24: 3 and 1
    (128, 8, 64, (128, 64)),  # 405B at TP 64: 2 and 1
])
def test_heads_as_tensor_parallel_ranks_hold_them(heads, kv, tp, expected):
    assert tp_decode_llama.tp_heads(heads, kv, tp) == expected


def test_token_generation_buckets():
    from costmodel_rows.llm import tnx_attention_length

    # Positions 128..255 attend over 129..256 entries: all in the 256 bucket.
    assert tnx_attention_length(128, 128, 256) == 256
    assert tnx_attention_length(2048, 2048, 4096) == 4096
    # 128 + 3968 tokens of 4096: 128 tokens in the 256 bucket, 256 in 512, 512 in 1024, 1024 in 2048, 2048 in
    # 4096: (256*128 + 512*256 + 1024*512 + 2048*1024 + 4096*2048) / 3968 = 11,173,888 / 3968 = 2816.
    assert tnx_attention_length(128, 3968, 4096) == 2816


def test_decode_step_of_one_rank():
    """A 2-layer toy at TP 4 on trn1: each rank's local shards, 2 all-reduces per layer, the embedding's
    all-reduce and the logits' all-gather; the compiled step is the kernels' work plus one launch."""
    result, b = tp_decode_llama.project_decode("tiny", 4, "trn1", context=64)
    timeline = result.projection
    names = [k.name for k in timeline.kernels]
    assert names.count("neuron::allreduce") == 2 * 2 + 1
    assert names.count("neuron::allgather_into_tensor") == 1
    # Toy heads: 6 query heads of 60 / 6 = 10 and 2 K/V heads -> padded to 8 and replicated to 4 over 4 ranks:
    # q_proj's local weight is 60 x (2 heads x 10) bf16, read with the token's 60 features.
    mm = [k for k in timeline.kernels if k.name == "neuron::mm"]
    assert mm[0].projection.bytes == 20 * 60 * 2 + 60 * 2 + 20 * 2
    work = sum(k.projection.work_s for k in timeline.kernels) * 1e6
    assert b.compiled_us == pytest.approx(work + costmodel.get_target("trn1").launch_s * 1e6)
    assert b.matmul_us + b.collective_us + b.other_us == pytest.approx(work)
    assert b.collective_us == pytest.approx(sum(k.projection.work_s for k in timeline.kernels
                                                if k.tier == "collective") * 1e6)
    # Eager, every kernel pays its own launch.
    assert b.eager_us >= b.launches * costmodel.get_target("trn1").launch_s * 1e6
    assert result.memory.fits


def test_decode_example_runs(capsys):
    assert tp_decode_llama.main(["--tiny"]) == 0
    out = capsys.readouterr().out
    assert "TP=4 on trn1" in out and "TP=8 on trn2 LNC=2" in out
    assert "compiled step (one NEFF)" in out and "collectives" in out


def test_training_example_searches_the_degree_that_fits(capsys):
    """The training example's path on a toy: the one-core run, then the search of the smallest degree whose
    rank fits (here against a core made 10x smaller than the toy's peak, so that one core does not fit)."""
    assert dry_run_llama.main(["--tiny", "--tp", "0"]) == 0
    out = capsys.readouterr().out
    assert "projected step" in out and "matmuls" in out and "collectives 0.0" in out
    config = dry_run_llama.llama_config(True)
    one = costmodel.dry_run(dry_run_llama.train_step, 1, 16, setup=lambda: dry_run_llama.build(config),
                            target="trn2")
    by = one.memory.by_category
    sharded = by["parameters"] + by["gradients"] + by["optimizer state"]
    small = MemoryReport(one.memory.target, one.memory.peak_bytes, by, sharded // 3)
    assert dry_run_llama.tp_degree_lower_bound(small) == 4  # sharded / 4 fits in sharded / 3, / 2 does not
    degree, rank = dry_run_llama.search_tp(config, small, 1, 16, "trn2", log=lambda line: None)
    assert degree == 4
    assert rank.world_size == 4 and rank.memory.fits
    assert dry_run_llama.breakdown(rank).collective_us > 0  # o_proj's and down_proj's all-reduces


def test_decoder_layer_worked_example():
    """docs/cost_model.md, Worked examples: one Llama-3-70B decoder layer decoding one token at TP 32 on trn1,
    context 4096. Per rank: 2 query heads (8192 x 256), 1 K/V head each (8192 x 128), the MLP's 28672 / 32 = 896
    columns; every matmul reads its weight from HBM at 272 GB/s (memory-bound: one token)."""
    result, b = tp_decode_llama.project_decode("llama-3-70b", 32, "trn1", context=4096, layer_only=True)
    bw = 272e9
    x, h = 8192 * 2, 8192
    q = (h * 256 * 2 + x + 256 * 2) / bw            # 15.482 us (o_proj the same bytes)
    kv = (h * 128 * 2 + x + 128 * 2) / bw           # 7.771 us each
    mlp = (h * 896 * 2 + x + 896 * 2) / bw          # 54.038 us each of gate, up, down
    attention = (2 * 4096 * 128 * 2 + 256 * 2 + 256 * 2 + 12) / bw  # the K/V cache read: 7.714 us
    assert b.matmul_us == pytest.approx((2 * q + 2 * kv + 3 * mlp + attention) * 1e6, rel=1e-3)
    assert b.matmul_us == pytest.approx(216.33, abs=0.01)
    # Two all-reduces of the 8192-wide bf16 hidden state over the 32 ranks (o_proj's and down_proj's).
    reduce = costmodel.collective("c10d::allreduce", x, x, 32, "trn1").duration_s * 1e6
    assert b.collective_us == pytest.approx(2 * reduce)
    assert b.compiled_us == pytest.approx(b.matmul_us + b.collective_us + b.other_us + 12.0)


def test_decode_steps_of_several_contexts_in_one_dry_run():
    """The validation rows' shortcut: one dry run, a step per context, split into equal parts, gives each
    context's own dry run's projection."""
    together = tp_decode_llama.project_decode_contexts("tiny", 4, "trn1", [64, 256])
    for context in (64, 256):
        _, alone = tp_decode_llama.project_decode("tiny", 4, "trn1", context)
        assert together[context].compiled_us == pytest.approx(alone.compiled_us)
        assert together[context].collective_us == pytest.approx(alone.collective_us)
    assert together[256].other_us > together[64].other_us  # the longer cache's write and attention


def test_every_row_of_the_tables():
    from costmodel_rows import llm

    assert len(llm.ROWS) == 18 + 27 + 2
    reasons = [r for r in llm.ROWS if r.reason]
    assert len(reasons) == 3 + 4 + 1  # int8 weights (trn1 3, inf2 4), P50 above P99 (1)
