"""TORCHNEURON_EXT_NUMERICS (issue 16 item 3, csrc/aten/numerics.*): `host` computes as the CPU;
`trainium` as TorchNeuron on Trainium, which has no 64-bit arithmetic. Each computation below is
run in both modes (a fresh interpreter each: the mode is read when the library loads) and gives a
different result in each for the documented reason."""
import functools
import json
import os
import tempfile

import pytest
import torch
from expecttest import TestCase

from tests.conftest import run_python
from torchneuron_ext import numerics

# Each entry: name -> expression over the device `d`; its value is printed as JSON (lists of floats/ints, dtype).
CASES = r'''
import json, warnings
import torch, torchneuron_ext
from torchneuron_ext.profiler import NeuronConfig, NeuronProfiler, format_report, summarize_trace
d = "neuron"
out = {"mode": torchneuron_ext.numerics.mode()}
def put(name, t):
    out[name] = [str(t.dtype), t.cpu().tolist()]
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    # float64 keeps 53 bits on the host; a NeuronCore adds in float32, where 1e15 + 1 == 1e15.
    put("f64_sum", torch.tensor([1e15, 1.0, -1e15], dtype=torch.float64, device=d).sum())
    put("f64_add", torch.tensor([1.0 + 2**-30], dtype=torch.float64, device=d) + 0)
    put("f64_overflow", torch.tensor([1e20], dtype=torch.float64, device=d) * 1e20)
    # int64 products and sums beyond 2**31 wrap in int32.
    put("i64_mul", torch.tensor([2**20], device=d) * torch.tensor([2**12], device=d))
    put("i64_add", torch.tensor([2**31 - 1], device=d) + 1)
    put("i64_big_input", torch.tensor([2**40 + 5], device=d) + 0)
    x = torch.tensor([2**31 - 1, 7], device=d)
    x.add_(1)
    put("i64_inplace", x)
    o = torch.empty(2, dtype=torch.float64, device=d)
    torch.add(torch.tensor([1.0, 2.0], dtype=torch.float64, device=d), 2**-30, out=o)
    put("f64_out", o)
    # Index arguments stay int64 (kernels demand it) and values within range are unchanged.
    put("i64_index", torch.tensor([10.0, 20.0, 30.0], dtype=torch.float64, device=d).gather(0, torch.tensor([2, 0], device=d)))
    put("f64_rms_norm", torch.rms_norm(torch.tensor([[1.0 + 2**-30, 1.0]], dtype=torch.float64, device=d), (2,)))
    # Casts and copies move all 64 bits (TorchNeuron bounces them through the CPU).
    w = torch.tensor([1.0 + 2**-40], dtype=torch.float64, device=d)
    put("f64_roundtrip", w)
    put("f64_clone", w.clone())
    put("f64_to_f32_to_f64", w.to(torch.float32).to(torch.float64))
    put("i64_to_i32", torch.tensor([2**40 + 5], device=d).to(torch.int32))
    put("i64_roundtrip", torch.tensor([2**40 + 5], device=d))
    # Fresh memory: NaN / 0xA5 bytes in trainium; the caching allocator's reused (zeroed) block on the host.
    z = torch.zeros(256, device=d)
    del z
    put("empty_f32_reused", torch.empty(256, device=d).isnan().all())
    put("empty_f32_read", torch.empty(4, device=d).add_(1))
    put("empty_i32", torch.empty(2, dtype=torch.int32, device=d).zero_().add_(torch.empty(2, dtype=torch.int32, device=d)))
    put("empty_bf16", torch.empty(2, dtype=torch.bfloat16, device=d).isnan())
    put("f32_unaffected", torch.tensor([1.0 + 2**-20], device=d) + 0)
torch.tensor([1.0], dtype=torch.float64, device=d) + 1  # a second add: no second warning
out["warnings"] = [str(w.message).split(" (Triggered internally")[0] for w in caught if "TORCHNEURON_EXT_NUMERICS" in str(w.message)]
# The profile report of a run names the mode when it is not the host's.
cfg = NeuronConfig(profile_output_dir=OUTDIR)
p = NeuronProfiler(cfg)
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.PrivateUse1],
                            experimental_config=cfg, on_trace_ready=p.export_trace):
    torch.ones(4, dtype=torch.float64, device=d).sum()
trace = json.load(open(p.last_export_dir + "/trace.json"))
out["trace_numerics"] = trace["neuron"]["numerics"]
out["summary_head"] = open(p.last_export_dir + "/summary.txt").read().splitlines()[:3]
print("RESULT " + json.dumps(out))
'''


def _run(mode: str, tmp: str) -> dict:
    code = CASES.replace("OUTDIR", repr(tmp))
    r = run_python(code, env={"TORCHNEURON_EXT_NUMERICS": mode}, timeout=300)
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


@functools.lru_cache(maxsize=None)
def _results() -> dict:
    return {m: _run(m, tempfile.mkdtemp(prefix=f"numerics_{m}_")) for m in ("host", "trainium")}


@pytest.fixture(scope="module")
def results():
    return _results()


F64, I64 = "torch.float64", "torch.int64"
DIFFERENT = [
    # name, host, trainium
    ("f64_sum", [F64, 1.0], [F64, 0.0]),
    ("f64_add", [F64, [1.0 + 2**-30]], [F64, [1.0]]),
    ("f64_overflow", [F64, [1e40]], [F64, [float("inf")]]),
    ("i64_mul", [I64, [2**32]], [I64, [0]]),
    ("i64_add", [I64, [2**31]], [I64, [-2**31]]),
    ("i64_big_input", [I64, [2**40 + 5]], [I64, [5]]),
    ("i64_inplace", [I64, [2**31, 8]], [I64, [-2**31, 8]]),
    ("f64_out", [F64, [1.0 + 2**-30, 2.0 + 2**-30]], [F64, [1.0, 2.0]]),
]


@pytest.mark.parametrize("name,host,trainium", DIFFERENT)
def test_64_bit_arithmetic_is_narrowed_only_in_trainium_mode(results, name, host, trainium):
    assert results["host"][name] == host
    assert results["trainium"][name] == trainium


def test_modes_are_reported(results):
    assert results["host"]["mode"] == "host"
    assert results["trainium"]["mode"] == "trainium"


def test_results_keep_their_dtype_and_index_arguments_work(results):
    for mode in ("host", "trainium"):
        assert results[mode]["i64_index"] == [F64, [30.0, 10.0]]
        dtype, [[a, b]] = results[mode]["f64_rms_norm"]
        assert dtype == F64
    # rms_norm (one kernel over the narrowed input) rounds 1 + 2**-30 to 1 before normalizing.
    assert results["trainium"]["f64_rms_norm"][1] == [[1.0, 1.0]]
    assert results["host"]["f64_rms_norm"][1] != [[1.0, 1.0]]


def test_copies_and_casts_keep_all_64_bits_in_both_modes(results):
    for mode in ("host", "trainium"):
        r = results[mode]
        assert r["f64_roundtrip"] == [F64, [1.0 + 2**-40]]
        assert r["f64_clone"] == [F64, [1.0 + 2**-40]]
        assert r["f64_to_f32_to_f64"] == [F64, [1.0]]  # the float32 cast rounds, as on the CPU
        assert r["i64_to_i32"] == ["torch.int32", [5]]
        assert r["i64_roundtrip"] == [I64, [2**40 + 5]]
        assert r["f32_unaffected"] == ["torch.float32", [1.0 + 2**-20]]


def test_fresh_device_memory_is_visible_in_trainium_mode(results):
    host, trn = results["host"], results["trainium"]
    assert host["empty_f32_reused"] == ["torch.bool", False]  # the freed zeros block, reused
    assert trn["empty_f32_reused"] == ["torch.bool", True]
    assert trn["empty_f32_read"][0] == "torch.float32" and all(v != v for v in trn["empty_f32_read"][1])
    assert trn["empty_i32"] == ["torch.int32", [-0x5A5A5A5B] * 2]  # 0xA5A5A5A5
    assert trn["empty_bf16"] == ["torch.bool", [True, True]]


class TestNumericsText(TestCase):
    def test_one_warning_per_operator(self):
        r = _results()["trainium"]
        self.assertEqual(_results()["host"]["warnings"], [])
        self.assertExpectedInline("\n".join(r["warnings"]), """\
TORCHNEURON_EXT_NUMERICS=trainium: aten::sum ran its float64 work in float32, as Trainium does (no 64-bit arithmetic); its results keep their 64-bit dtype. Shown once per operator.
TORCHNEURON_EXT_NUMERICS=trainium: aten::add.Tensor ran its float64 work in float32, as Trainium does (no 64-bit arithmetic); its results keep their 64-bit dtype. Shown once per operator.
TORCHNEURON_EXT_NUMERICS=trainium: aten::mul.Tensor ran its float64 work in float32, as Trainium does (no 64-bit arithmetic); its results keep their 64-bit dtype. Shown once per operator.
TORCHNEURON_EXT_NUMERICS=trainium: aten::add_.Tensor ran its int64 work in int32, as Trainium does (no 64-bit arithmetic); its results keep their 64-bit dtype. Shown once per operator.
TORCHNEURON_EXT_NUMERICS=trainium: aten::add.out ran its float64 work in float32, as Trainium does (no 64-bit arithmetic); its results keep their 64-bit dtype. Shown once per operator.
TORCHNEURON_EXT_NUMERICS=trainium: aten::gather ran its float64 work in float32 and its int64 work in int32, as Trainium does (no 64-bit arithmetic); its results keep their 64-bit dtype. Shown once per operator.
TORCHNEURON_EXT_NUMERICS=trainium: aten::_fused_rms_norm ran its float64 work in float32, as Trainium does (no 64-bit arithmetic); its results keep their 64-bit dtype. Shown once per operator.""")

    def test_invalid_mode_names_the_valid_ones(self):
        r = run_python("""
            import torch, torchneuron_ext
            for f in (torchneuron_ext.numerics.mode, lambda: torch.ones(2, device="neuron")):
                try:
                    f()
                except ValueError as e:
                    print(type(e).__name__, str(e).splitlines()[0])
        """, env={"TORCHNEURON_EXT_NUMERICS": "fast"})
        assert r.returncode == 0, r.stderr
        self.assertExpectedInline(r.stdout.strip(), """\
ValueError TORCHNEURON_EXT_NUMERICS='fast' is not a numerics mode; use 'host' (the default: the host CPU's arithmetic) or 'trainium' (Trainium's: float64 computed in float32, int64 in int32, fresh device memory filled with NaN / 0xA5 bytes).
ValueError TORCHNEURON_EXT_NUMERICS='fast' is not a numerics mode; use 'host' (the default: the host CPU's arithmetic) or 'trainium' (Trainium's: float64 computed in float32, int64 in int32, fresh device memory filled with NaN / 0xA5 bytes).""")


def test_trace_and_summary_record_the_mode(results):
    assert results["host"]["trace_numerics"] == "host"
    assert results["trainium"]["trace_numerics"] == "trainium"
    assert results["trainium"]["summary_head"][2].startswith("numerics             trainium")
    assert not results["host"]["summary_head"][2].startswith("numerics")


def test_default_mode_in_this_process_is_host(monkeypatch):
    if "TORCHNEURON_EXT_NUMERICS" in os.environ:
        pytest.skip("the test run sets TORCHNEURON_EXT_NUMERICS")
    assert numerics.mode() == "host"
    assert numerics.MODES == ("host", "trainium")
    x = torch.tensor([1e15, 1.0, -1e15], dtype=torch.float64, device="neuron")
    assert x.sum().item() == 1.0
