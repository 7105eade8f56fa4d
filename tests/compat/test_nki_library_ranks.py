"""The NKI Library plugin's multi-rank path (compat/nki_library_ranks.py): a test with collective_ranks > 1
runs on nki.launch_ranks, one worker per rank with its own inputs, and the harness validates each rank's
outputs. The harness here is a tiny fake of our own in AWS's shape; the kernels are ours."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from expecttest import TestCase

from torchneuron_ext.compat import nki_library_ranks as ranks

# A harness of the same shape as AWS's: the orchestrator module imports the names the plugin reads, runs the
# simulator through _run_simulator_inference, and its own validator reads output_worker_<rank>/ per rank.
_FAKE_HARNESS = {
    "test/__init__.py": "",
    "test/pytest.ini": "[pytest]\nmarkers =\n    fast: fast tests\n",
    "test/conftest.py": """
        import pytest
        import test.utils.test_orchestrator as to

        def pytest_addoption(parser):
            parser.addoption("--test-mode", action="store")

        @pytest.fixture
        def orchestrator(tmp_path):
            return to.Orchestrator(str(tmp_path))
    """,
    "test/utils/__init__.py": "",
    "test/utils/exceptions.py": "class InferenceException(Exception):\n    pass\n",
    "test/utils/common_dataclasses.py": """
        from dataclasses import dataclass, field
        from typing import Any, Callable

        INF_ARTIFACT_DIR_NAME = "inference"

        @dataclass
        class PerRankLazyGenerator:
            generator: Callable
            calls: list = field(default_factory=list)

            def for_rank(self, rank_id):
                self.calls.append(rank_id)
                return self.generator(rank_id=rank_id)

        class PerRankLazyInputGenerator(PerRankLazyGenerator):
            pass

        class PerRankLazyGoldenGenerator(PerRankLazyGenerator):
            pass

        def normalize_golden_output(golden_output, rank_id=0):
            return golden_output.for_rank(rank_id) if isinstance(golden_output, PerRankLazyGoldenGenerator) else golden_output

        class Platform:
            def get_nc_gen(self):
                return "gen3"

        @dataclass
        class KernelArgs:
            kernel_func: Any
            kernel_input: Any
            golden_output: Any
            collective_ranks: int = 1
            lnc: int = 1
            atol: float = 1e-5

            def __post_init__(self):
                self.inference_args = type("InferenceArgs", (), {"collective_ranks": self.collective_ranks})()
                self.compiler_input = type("CompilerArgs", (), {"logical_nc_config": self.lnc,
                                                                "platform_target": Platform()})()
                self.validation_args = type("ValidationArgs", (), {"golden_output": self.golden_output})()
    """,
    "test/utils/test_orchestrator.py": """
        import contextlib, enum, os, pathlib
        import numpy as np
        from .common_dataclasses import (INF_ARTIFACT_DIR_NAME, PerRankLazyGoldenGenerator,
                                         PerRankLazyInputGenerator, normalize_golden_output)
        from .exceptions import InferenceException

        class MetricName(enum.Enum):
            SIMULATION_TIME = "simulation_time"

        class Collector:
            timers = []

            @contextlib.contextmanager
            def timer(self, name):
                yield
                self.timers.append(name)

        class Emitter:
            def get_collector(self):
                return Collector()

        class FilesystemArgs:
            def __init__(self, path):
                self.artifacts_output_directory_path = path

        class Orchestrator:
            single_launches = []

            def __init__(self, path):
                self.fs_config = FilesystemArgs(path)
                self.emitter = Emitter()

            def execute(self, kut):
                path = self._run_simulator_inference(kut)
                self._validate(kut, path)

            def _run_simulator_inference(self, kut):
                import nki
                Orchestrator.single_launches.append(kut.kernel_func.__name__)
                try:
                    inputs = {k.removesuffix(".must_alias_input"): v for k, v in kut.kernel_input.items()}
                    out = nki.cpu_simulate(kut.kernel_func)[kut.compiler_input.logical_nc_config](**inputs)
                except Exception as e:
                    raise InferenceException(str(e)) from e
                name, golden = next(iter(normalize_golden_output(kut.golden_output).items()))
                path = os.path.join(self.fs_config.artifacts_output_directory_path, INF_ARTIFACT_DIR_NAME)
                self.__dump_tensors__(path, {name: np.asarray(out, golden.dtype)}, lambda n: n)
                return path

            def _validate(self, kut, path):
                per_rank = isinstance(kut.golden_output, PerRankLazyGoldenGenerator)
                for rank in range(kut.collective_ranks if per_rank else 1):
                    folder = pathlib.Path(path) / f"output_worker_{rank}" if kut.collective_ranks > 1 else pathlib.Path(path)
                    for name, want in normalize_golden_output(kut.golden_output, rank).items():
                        got = np.fromfile(folder / (name + ".bin"), want.dtype).reshape(want.shape)
                        assert np.allclose(got, want, atol=kut.atol), f"rank{rank}:{name} {got.ravel()} != {want.ravel()}"

            def __dump_tensors__(self, target, tensors, name_fn):
                os.makedirs(target, exist_ok=True)
                for name, value in tensors.items():
                    with open(os.path.join(target, name_fn(name) + ".bin"), "wb") as f:
                        f.write(value.tobytes())
    """,
    "test/integration/__init__.py": "",
    "test/integration/test_ranks.py": """
        import numpy as np
        import pytest
        import nki
        import nki.collectives as ncc
        import nki.isa as nisa
        import nki.language as nl
        from test.utils.common_dataclasses import (KernelArgs, PerRankLazyGoldenGenerator,
                                                   PerRankLazyInputGenerator)
        import test.utils.test_orchestrator as to

        @nki.jit
        def all_sum(x, ranks):
            src = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm, name="src")
            out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm, name="out")
            nisa.dma_copy(dst=src, src=x)
            ncc.all_reduce(srcs=[src], dsts=[out], replica_group=ncc.ReplicaGroup([list(range(ranks))]), op=nl.add)
            return out

        @nki.jit
        def scale_in_place(x, scale):
            t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x)
            nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=scale)
            nisa.dma_copy(dst=x, src=t)
            out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
            nisa.dma_copy(dst=out, src=t)
            return out

        def _x(rank_id):
            return np.arange(8, dtype=np.float32).reshape(2, 4) + 10 * rank_id

        def _per_rank(ranks, lnc=1, wrong_rank=None):
            total = sum(_x(r) for r in range(ranks))
            golden = lambda rank_id: {"out": total + (1 if rank_id == wrong_rank else 0)}
            return KernelArgs(all_sum, PerRankLazyInputGenerator(lambda rank_id: {"x": _x(rank_id), "ranks": ranks}),
                              PerRankLazyGoldenGenerator(golden), collective_ranks=ranks, lnc=lnc)

        @pytest.mark.fast
        @pytest.mark.parametrize("ranks,lnc", [(2, 1), (4, 2)])
        def test_per_rank(orchestrator, ranks, lnc):
            kut = _per_rank(ranks, lnc)
            orchestrator.execute(kut)
            assert kut.kernel_input.calls == list(range(ranks))
            assert sorted(kut.golden_output.calls) == sorted(list(range(ranks)) * 2)  # names/dtypes, then validation

        @pytest.mark.fast
        def test_wrong_golden_on_rank_1(orchestrator):
            orchestrator.execute(_per_rank(2, wrong_rank=1))

        @pytest.mark.fast
        def test_one_input_for_every_rank(orchestrator):
            # a plain dict is every rank's input; each rank writes its own copy of it
            x = _x(0)
            orchestrator.execute(KernelArgs(scale_in_place, {"x.must_alias_input": x, "scale": 3.0},
                                            {"out": 3 * _x(0)}, collective_ranks=2))
            np.testing.assert_array_equal(x, _x(0))

        @pytest.mark.fast
        def test_single_rank_takes_the_harness_path(orchestrator):
            orchestrator.execute(KernelArgs(scale_in_place, {"x": _x(1), "scale": 2.0}, {"out": 2 * _x(1)}))
            assert to.Orchestrator.single_launches == ["scale_in_place"]

        @pytest.mark.fast
        def test_kernel_error_is_the_harness_inference_error(orchestrator):
            kut = KernelArgs(all_sum, {"x": _x(0), "ranks": 4}, {"out": _x(0)}, collective_ranks=2)
            with pytest.raises(to.InferenceException, match="rank"):
                orchestrator.execute(kut)
    """,
}


def _write(root: Path, files: dict) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def _package_root() -> str:
    import torchneuron_ext
    return os.path.dirname(os.path.dirname(os.path.abspath(torchneuron_ext.__file__)))


def _run_fake_harness(root: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEURON_RT_", "NEURON_EMU_", "NKI_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(root), _package_root()])
    env["TORCHNEURON_EXT_NKI_COMPAT"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "test/integration", "-p", "torchneuron_ext.compat.nki_library",
         "-p", "no:cacheprovider", "-p", "no:randomly", "--test-mode", "simulation", "-m", "fast", "-rA", *extra],
        cwd=root, env=env, capture_output=True, text=True, timeout=300)


def _outcomes(stdout: str) -> dict:
    out = {}
    for line in stdout.splitlines():
        for word in ("PASSED", "FAILED", "ERROR"):
            if line.startswith(word + " "):
                out[line.split()[1].split("::")[-1]] = word
    return out


def test_multi_rank_tests_run_per_rank_and_the_harness_validates_each_rank(tmp_path: Path) -> None:
    _write(tmp_path, _FAKE_HARNESS)
    r = _run_fake_harness(tmp_path)
    assert "multi-rank tests run on nki.launch_ranks, one worker per rank" in r.stdout, r.stdout + r.stderr
    assert _outcomes(r.stdout) == {
        "test_per_rank[2-1]": "PASSED", "test_per_rank[4-2]": "PASSED",
        # the harness's own validator names the rank whose output differs
        "test_wrong_golden_on_rank_1": "FAILED",
        "test_one_input_for_every_rank": "PASSED", "test_single_rank_takes_the_harness_path": "PASSED",
        "test_kernel_error_is_the_harness_inference_error": "PASSED"}, r.stdout + r.stderr
    assert "AssertionError: rank1:out" in r.stdout


def test_single_launch_collectives_keeps_the_harness_path(tmp_path: Path) -> None:
    _write(tmp_path, _FAKE_HARNESS)
    r = _run_fake_harness(tmp_path, "--single-launch-collectives", "-k", "per_rank or every_rank")
    assert "multi-rank tests run on nki.launch_ranks" not in r.stdout
    # AWS's single launch: per-rank inputs are no keyword arguments, and one launch writes no rank's outputs
    outcomes = _outcomes(r.stdout)
    assert outcomes == {"test_per_rank[2-1]": "FAILED", "test_per_rank[4-2]": "FAILED",
                        "test_one_input_for_every_rank": "FAILED"}, r.stdout + r.stderr
    assert "'PerRankLazyInputGenerator' object has no attribute 'items'" in r.stdout
    assert "output_worker_0/out.bin" in r.stdout


def test_a_harness_without_the_names_is_left_alone(tmp_path: Path) -> None:
    _write(tmp_path, {"test/__init__.py": "", "test/utils/__init__.py": "",
                      "test/utils/test_orchestrator.py": "class Orchestrator:\n"
                                                         "    def _run_simulator_inference(self, kut):\n"
                                                         "        return 'single'\n"})
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        from test.utils.test_orchestrator import Orchestrator
        from torchneuron_ext.compat import nki_library_ranks as ranks
        before = Orchestrator._run_simulator_inference
        print(ranks.install(Orchestrator), Orchestrator._run_simulator_inference is before)
    """)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == ("['INF_ARTIFACT_DIR_NAME', 'InferenceException', 'MetricName', "
                                "'PerRankLazyInputGenerator', 'normalize_golden_output', "
                                "'Orchestrator.__dump_tensors__'] True")


class PerRankPieces(TestCase):
    def test_rank_inputs(self) -> None:
        class PerRank:
            def for_rank(self, r: int) -> dict:
                return {"x.must_alias_input": np.arange(4.0)[::2] + r, "n": r}

        got = ranks.rank_inputs(PerRank(), 2, PerRank)
        assert [sorted(g) for g in got] == [["n", "x"], ["n", "x"]]
        assert [g["n"] for g in got] == [0, 1] and all(g["x"].flags.c_contiguous for g in got)
        np.testing.assert_array_equal(got[1]["x"], [1.0, 3.0])
        shared = {"x": np.zeros(3)}
        a, b = ranks.rank_inputs(shared, 2, PerRank)
        assert a["x"] is not b["x"] and a["x"] is not shared["x"]
        assert ranks.rank_inputs(None, 2, PerRank) == [{}, {}]

    def test_rank_outputs(self) -> None:
        golden = {"a": np.zeros(2, np.float16), "b": np.zeros(2, np.int32)}
        out = ranks.rank_outputs((np.array([1.5, 2.0]), np.array([3, 4])), golden, 0)
        assert {k: v.dtype for k, v in out.items()} == {"a": np.float16, "b": np.int32}
        with self.assertRaises(RuntimeError) as e:
            ranks.rank_outputs(np.zeros(2), golden, 3)
        self.assertExpectedInline(str(e.exception), """\
rank 3: the kernel returned 1 outputs but the golden names 2: ['a', 'b']""")
