"""The launch modes public kernels use: nki.jit(mode=...) for every mode, nki.trace, benchmarking with
nt.tensor placeholders instead of arrays."""
from __future__ import annotations

import numpy as np
import pytest

import torchneuron_ext.nki.legacy as nki
import torchneuron_ext.nki.legacy.language as nl
import torchneuron_ext.nki.legacy.typing as nt


def f32(*shape: int) -> np.ndarray:
    return np.random.default_rng(0).standard_normal(shape).astype(np.float32)


@nki.jit(mode="trace")
def _exp_tile(t):
    # A sub-kernel in the style of the flash-attention reference: traced into its caller.
    return nl.exp(t)


@pytest.mark.parametrize("mode", ["auto", "trace", "simulation", "baremetal", "benchmark", "jax", "torchxla"])
def test_every_mode_runs_the_kernel(mode: str) -> None:
    @nki.jit(mode=mode)
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, _exp_tile(nl.load(a)))
        return out

    a = f32(16, 8)
    np.testing.assert_allclose(k(a), np.exp(a), rtol=1e-6)
    if mode == "benchmark":
        assert k.benchmark_result.nc_latency.get_latency_percentile(99) > 0


def _copy(a):
    # Left undecorated: each test wraps it in the entry point it is about.
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.load(a))
    return out


def test_nki_trace_is_jit_in_trace_mode() -> None:
    k = nki.trace(_copy)
    assert k.mode == "trace"
    a = f32(4, 4)
    np.testing.assert_array_equal(k(a), a)


def test_unknown_mode_is_rejected() -> None:
    with pytest.raises(ValueError, match="nki.jit mode must be one of"):
        nki.jit(mode="fast")


def test_benchmark_with_placeholders() -> None:
    # The matmul tutorial benchmarks with nt.tensor[[shape], dtype] instead of arrays.
    bench = nki.benchmark(warmup=2, iters=3)(nki.jit(_copy))
    out = bench(nt.tensor[[128, 64], nl.bfloat16])
    assert out.shape == (128, 64) and out.dtype == nl.bfloat16
    assert np.isfinite(out.astype(np.float32)).all()
    assert bench.benchmark_result.nc_latency.get_latency_percentile(50) > 0


def test_placeholder_without_dtype_is_an_error() -> None:
    @nki.jit
    def k(a):
        return a

    with pytest.raises(TypeError, match="needs a shape and a dtype"):
        k(nt.tensor[128, 64])


def test_profile_writes_its_artifacts(tmp_path) -> None:
    import json
    import os

    @nki.profile(working_directory=str(tmp_path), save_neff_name="k.neff", save_trace_name="prof.ntff",
                 num_execs=20, profile_nth=10)
    def k(a, b):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(a) + nl.load(b))
        return out

    a = f32(128, 64)
    np.testing.assert_allclose(k(a, a), 2 * a)
    assert sorted(os.listdir(tmp_path)) == ["json_reports", "k.neff", "prof_exec_10.ntff", "prof_exec_20.ntff"]
    assert len(os.listdir(tmp_path / "json_reports")) == 2
    trace = json.loads((tmp_path / "prof_exec_10.ntff").read_text())
    assert trace["format"] == "torchneuron_ext-nki-simulator/1" and trace["instructions"]["load"] == 2
    assert "no NEFF" in json.loads((tmp_path / "k.neff").read_text())["note"]
    (tmp_path / "k.neff").write_text("kept")
    with pytest.warns(UserWarning, match="overwrite=False, so the artifacts .* were kept"):
        np.testing.assert_allclose(k(a, a), 2 * a)
    assert (tmp_path / "k.neff").read_text() == "kept"
