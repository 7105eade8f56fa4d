"""AWS's NKI Library harness against the simulator (issue 29, item 1): the aliases its harness imports, the
neuron_dtypes stand-in, nki.simulate(kernel)[lnc], the target switches, the pytest plugin and the
per-folder runner. Kernels here are our own, in AWS's style; nothing of AWS's code is used."""
from __future__ import annotations

import io
import os
import textwrap
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from expecttest import TestCase

import torchneuron_ext.nki as nki
import torchneuron_ext.nki.isa as nisa
import torchneuron_ext.nki.language as nl
from tests.conftest import run_python
from torchneuron_ext.compat import neuron_dtypes as dt
from torchneuron_ext.compat import nki_library_runner as runner
from torchneuron_ext.compat.nki_library_harness import HardwarePathUnavailable
from torchneuron_ext.compat.nki_library_harness import perf_analysis_private, remote_lock_scripts
from torchneuron_ext.nki import dtypes as nki_dtypes
from torchneuron_ext.nki.errors import NKIUnsupportedError

_TARGET_VARS = ("NEURON_EMU_TARGET", "NKI_TARGET", "NKI_NC_VERSION", "NEURON_PLATFORM_TARGET_OVERRIDE")


@pytest.fixture
def no_target_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for var in _TARGET_VARS:
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


# --- the aliases AWS's harness imports ------------------------------------------------------------------

def test_harness_module_names_are_the_simulators_modules() -> None:
    r = run_python("""
        import builtins, importlib, sys
        import torchneuron_ext.nki as tn
        # What AWS's test/utils/simulation_setup.py imports, in its words.
        import nki_cpu_simulator.nki.builtin as sim_builtin
        import nki_cpu_simulator.nki.compiler as sim_ncc
        import nki_cpu_simulator.nki.isa as sim_nisa
        import nki_cpu_simulator.nki.isa.constants as sim_nisa_constants
        import nki_cpu_simulator.nki.language as sim_nl
        import nki_cpu_simulator.nki.language.dtypes as sim_dtypes
        import nki_cpu_simulator.nki.tensor as sim_ntensor
        import nki_cpu_simulator.nki.typing as sim_nt
        from nki_cpu_simulator import nki as sim_nki
        import nki, nki.dtype, nki.tensor, nki.builtin, nki.simulator
        import neuron_dtypes
        from neuronxcc.starfish.support.dtype import static_cast
        pairs = [(sim_nki, tn), (nki, tn), (sim_builtin, tn.builtin), (sim_ncc, tn.compiler), (sim_nisa, tn.isa),
                 (sim_nisa_constants, tn.isa.constants), (sim_nl, tn.language), (sim_dtypes, tn.language.dtypes),
                 (sim_ntensor, tn.tensor), (sim_nt, tn.typing), (nki.dtype, tn.language.dtypes),
                 (nki.tensor, tn.tensor), (nki.builtin, tn.builtin), (nki.simulator, tn.simulator),
                 (neuron_dtypes, importlib.import_module("torchneuron_ext.compat.neuron_dtypes")),
                 (static_cast, neuron_dtypes.static_cast)]
        # test/utils/kernel_tracer.py (trace_only tests): after simulation_setup made nki.compiler the simulator's
        sys.modules["nki.compiler"] = sim_ncc
        from nki.compiler.frontend import NKIFrontend, ParserFrontend
        pairs.append((ParserFrontend, importlib.import_module("torchneuron_ext.nki.frontend").ParserFrontend))
        print([i for i, (a, b) in enumerate(pairs) if a is not b])
        print(nki.dtype.float8_e4m3, nki.cpu_simulate is nki.simulate)
        try:
            import nki_cpu_simulator.nki.frontend
        except ModuleNotFoundError as e:
            print(str(e).split(":")[0])
    """, env={"TORCHNEURON_EXT_NKI_COMPAT": "1"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["[]", "float8_e4m3 True", "No module named 'nki_cpu_simulator.nki.frontend'"]


def test_the_start_up_hook_waits_for_the_same_names() -> None:
    from torchneuron_ext.compat import aliases, startup
    assert startup._TOP_LEVEL == aliases._TOP_LEVEL


def test_nki_dtype_and_tensor_are_modules_kernels_can_annotate_with() -> None:
    def kernel(x: nki.tensor.NKITensor, dtype: nki.dtype = nl.bfloat16) -> None:  # AWS's annotation style
        pass
    assert nki.dtype.bfloat16 == nl.bfloat16 and nki.tensor.NKITensor is nki.NKITensor
    # this file's annotations are strings (from __future__ import annotations); a kernel without it evaluates them
    assert eval(kernel.__annotations__["dtype"], {"nki": nki}) is nki.dtype


# --- neuron_dtypes ----------------------------------------------------------------------------------------

def test_static_cast_rounds_to_nearest_even_like_ml_dtypes() -> None:
    ulp = 2.0 ** -7  # bfloat16's spacing in [1, 2)
    # ties go to the even neighbour; just above a tie goes up; a double rounds once, not via float32
    values = np.array([1 + ulp / 2, 1 + 3 * ulp / 2, 1 + ulp / 2 + 2.0 ** -30, -(1 + ulp / 2), 3.3], np.float64)
    got = dt.static_cast(values, dt.bfloat16)
    assert got.dtype == np.dtype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(got.astype(np.float64), [1.0, 1 + 2 * ulp, 1 + ulp, -1.0, 3.296875])
    np.testing.assert_array_equal(got, values.astype(ml_dtypes.bfloat16))
    for fp8 in (dt.float8_e4m3, dt.float8_e4m3fn, dt.float8_e5m2):
        x = np.linspace(-3, 3, 97, dtype=np.float32)
        np.testing.assert_array_equal(dt.static_cast(x, fp8).view(np.uint8), x.astype(fp8).view(np.uint8))
    # into an integer dtype a float truncates toward zero, as C's static_cast
    np.testing.assert_array_equal(dt.static_cast([1.7, -1.7, 2.5], np.int32), [1, -1, 2])
    # dtype names and NKI dtype objects are accepted alike
    np.testing.assert_array_equal(dt.static_cast(values, "bfloat16"), got)
    np.testing.assert_array_equal(dt.static_cast(values, nl.bfloat16), got)


def test_neuron_dtypes_helpers() -> None:
    assert [dt.sizeinbytes(d) for d in (np.float32, dt.bfloat16, dt.float8_e4m3, nl.int16)] == [4, 2, 1, 2]
    assert dt.finfo(dt.bfloat16).dtype == np.dtype(ml_dtypes.bfloat16)
    assert float(dt.finfo(dt.float8_e4m3fn).max) == 448.0
    assert float(dt.finfo(np.float32).max) == float(np.finfo(np.float32).max)
    assert [dt.is_float_type(d) for d in (dt.bfloat16, dt.float8_e5m2, np.float16, np.int8, np.uint32)] == [
        True, True, True, False, False]
    with pytest.raises(TypeError, match="neuron_dtypes.finfo takes a floating-point dtype, got int32"):
        dt.finfo(np.int32)
    with pytest.raises(AttributeError, match="module 'neuron_dtypes' has no attribute 'float7'"):
        dt.float7  # noqa: B018


def test_static_cast_into_packed_mx_dtypes() -> None:
    if not hasattr(nki_dtypes, "pack_x4"):
        # Without the simulator's MX dtypes the name is no dtype at all, and says so.
        with pytest.raises(AttributeError, match="float8_e4m3fn_x4"):
            dt.float8_e4m3fn_x4  # noqa: B018
        return
    values = np.array([[1.0, -2.0, 0.5, 448.0, 1.0625, 3.0, -0.25, 0.0]], np.float32)
    packed = dt.static_cast(values, dt.float8_e4m3fn_x4)
    assert packed.shape == (1, 2) and dt.sizeinbytes(dt.float8_e4m3fn_x4) == 4
    bytes_ = values.astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
    np.testing.assert_array_equal(packed.view(np.uint32), bytes_.reshape(1, 2, 4).view("<u4").reshape(1, 2))
    # out of a packed dtype: each element's 4 values, the last axis 4 times longer (AWS's MX goldens
    # dequantize with static_cast(data_x4, float32) and assert that expansion)
    unpacked = dt.static_cast(packed, np.float32)
    assert unpacked.shape == (1, 8) and unpacked.dtype == np.float32
    np.testing.assert_array_equal(unpacked, values.astype(ml_dtypes.float8_e4m3fn).astype(np.float32))
    fp4 = np.array([[0.5, -6.0, 1.5, 0.0], [3.0, -1.0, 4.0, 2.0]], np.float32)  # representable in e2m1
    packed4 = dt.static_cast(fp4, dt.float4_e2m1fn_x4)
    assert packed4.shape == (2, 1) and packed4.dtype == dt.float4_e2m1fn_x4
    np.testing.assert_array_equal(dt.static_cast(packed4, np.float32), fp4)
    assert dt.static_cast(packed4, dt.bfloat16).dtype == dt.bfloat16
    np.testing.assert_array_equal(dt.static_cast(packed4, dt.float4_e2m1fn_x4).view("<u2"), packed4.view("<u2"))


# --- entry points ---------------------------------------------------------------------------------------

@nki.jit
def _write_program_id(out_shape: tuple):
    """Each logical core writes its program id into its row of a shared output."""
    out = nl.ndarray(out_shape, dtype=nl.float32, buffer=nl.shared_hbm)
    pid = nl.program_id(0)
    t = nl.ndarray((1, out_shape[1]), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=float(pid + 1))
    nisa.dma_copy(dst=out[pid:pid + 1, :], src=t)
    return out


@nki.jit
def _scaled_copy(src, scale: float = 1.0):
    out = nl.ndarray(src.shape, dtype=src.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(src.shape, dtype=src.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=src)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=scale)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_simulate_is_subscriptable_by_lnc_and_runs_every_instance() -> None:
    out = nki.simulate(_write_program_id)[2]((2, 4))
    np.testing.assert_array_equal(out, [[1] * 4, [2] * 4])
    assert _write_program_id.last_result.grid == (2,)
    # the same launch in AWS's other spellings
    np.testing.assert_array_equal(nki.simulate(_write_program_id[2])((2, 4)), out)
    np.testing.assert_array_equal(nki.cpu_simulate(_write_program_id)[2](out_shape=(2, 4)), out)
    np.testing.assert_array_equal(nki.simulator.simulate_kernel(_write_program_id, ((2, 4),), {}, 2), out)
    # LNC=1 runs one instance: the second row is never written
    one = nki.simulate(_write_program_id)[1]((1, 4))
    np.testing.assert_array_equal(one, [[1] * 4])
    assert _write_program_id.last_result.grid == (1,)


def test_simulate_takes_arguments_by_parameter_name() -> None:
    x = np.arange(128 * 8, dtype=np.float32).reshape(128, 8)
    np.testing.assert_array_equal(nki.cpu_simulate(_scaled_copy)[1](src=x, scale=2.0), 2 * x)
    np.testing.assert_array_equal(nki.simulate(_scaled_copy)(x, scale=3.0), 3 * x)
    np.testing.assert_array_equal(nki.simulator.simulate_kernel(_scaled_copy.func, (), {"src": x}), x)


class TestEntryPointErrors(TestCase):
    def test_errors(self) -> None:
        with self.assertRaises(ValueError) as ctx:
            nki.simulate(_scaled_copy)[3]
        self.assertExpectedInline(str(ctx.exception), """in NKI 0.2+, kernel[n] sets the logical NeuronCore degree and n must be 1 or 2, got [3]; an SPMD grid of any shape is a legacy-dialect (neuronxcc.nki) feature""")
        with self.assertRaises(TypeError) as ctx:
            nki.simulate(_scaled_copy)[2][2]
        self.assertExpectedInline(str(ctx.exception), """nki.simulate: the kernel _scaled_copy is already bound to [2]; index it once""")
        with self.assertRaises(TypeError) as ctx:
            nki.simulate(_scaled_copy)[1](np.zeros((4, 4), np.float32), bogus=1)
        self.assertExpectedInline(str(ctx.exception), """NKI kernel _scaled_copy: got an unexpected keyword argument 'bogus'""")
        with self.assertRaises(ValueError) as ctx:
            nki.simulator.simulate_kernel(_scaled_copy[2], (np.zeros((4, 4), np.float32),), None, 2)
        self.assertExpectedInline(str(ctx.exception), """nki.simulator.simulate_kernel: the kernel is already bound to LNC=2; pass the kernel itself with lnc=2""")
        with self.assertRaises(TypeError) as ctx:
            nki.simulator.simulate_kernel(_scaled_copy, np.zeros((4, 4), np.float32))
        self.assertExpectedInline(str(ctx.exception), """nki.simulator.simulate_kernel takes the positional arguments as a sequence, got ndarray""")


# --- the environment switches ---------------------------------------------------------------------------

_SEEN: list = []


@nki.jit
def _record_nc_version(x):
    _SEEN.append(nisa.get_nc_version())
    return x


def _nc_version_of_a_launch() -> str:
    _SEEN.clear()
    nki.simulate(_record_nc_version)[1](np.zeros((1, 1), np.float32))
    return _SEEN[-1].name


def test_nki_nc_version_selects_the_target_per_launch(no_target_env: pytest.MonkeyPatch) -> None:
    for value, gen in [("gen2", "gen2"), ("gen3", "gen3"), ("gen4", "gen4"), ("2", "gen2"), ("4", "gen4")]:
        no_target_env.setenv("NKI_NC_VERSION", value)  # as AWS's harness sets it just before each launch
        assert _nc_version_of_a_launch() == gen, value
    no_target_env.delenv("NKI_NC_VERSION")
    no_target_env.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "gen4")
    assert _nc_version_of_a_launch() == "gen4"
    # one precedence: the NKI toolchain's NKI_TARGET, then NKI_NC_VERSION, then the SDK-wide override
    no_target_env.setenv("NKI_NC_VERSION", "gen2")
    assert _nc_version_of_a_launch() == "gen2"
    no_target_env.setenv("NKI_TARGET", "trn2")
    assert _nc_version_of_a_launch() == "gen3"
    # a kernel's own platform_target takes AWS's generation names too
    _SEEN.clear()
    nki.simulate(nki.jit(_record_nc_version.func, platform_target="gen4"))(np.zeros((1, 1), np.float32))
    assert _SEEN[-1].name == "gen4"


class TestTargetErrors(TestCase):
    def test_bad_nc_version(self) -> None:
        old = {v: os.environ.pop(v, None) for v in _TARGET_VARS}
        os.environ["NKI_NC_VERSION"] = "gen9"
        try:
            with self.assertRaises(ValueError) as ctx:
                _nc_version_of_a_launch()
        finally:
            os.environ.pop("NKI_NC_VERSION")
            os.environ.update({k: v for k, v in old.items() if v is not None})
        self.assertExpectedInline(str(ctx.exception), """NKI_NC_VERSION='gen9': unknown Neuron platform target 'gen9': use one of trn1, inf2, trn2, trn3""")

    def test_precise_fp_off_is_refused_by_name(self) -> None:
        os.environ["NKI_PRECISE_FP"] = "0"
        try:
            with self.assertRaises(NKIUnsupportedError) as ctx:
                _nc_version_of_a_launch()
        finally:
            del os.environ["NKI_PRECISE_FP"]
        self.assertExpectedInline(str(ctx.exception), """NKI_PRECISE_FP=0 (low-precision tensors held as float32) is not modelled: the simulator always stores bfloat16 and fp8 tensors in their own dtypes, which is NKI_PRECISE_FP=1 (the default); unset NKI_PRECISE_FP or set it to 1""")


def test_precise_fp_on_is_the_simulators_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NKI_PRECISE_FP", "1")
    x = np.array([[1 + 2.0 ** -8]], np.float32)
    out = nki.simulate(_scaled_copy)(x.astype(ml_dtypes.bfloat16), scale=1.0)
    assert out.dtype == np.dtype(ml_dtypes.bfloat16) and float(out[0, 0]) == 1.0  # stored as bf16, rounded


# --- nki.builtin ----------------------------------------------------------------------------------------

def test_builtin_lang_shared_constant_from_an_array_or_an_npy_file(tmp_path: Path) -> None:
    rotation = np.roll(np.eye(8, dtype=np.float32), 1, axis=1)
    path = tmp_path / "rotation.npy"
    np.save(path, rotation)

    @nki.jit
    def kernel(x):
        out = nl.ndarray((8, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        ident = nki.builtin.lang.shared_constant(nki.builtin.lang.identity(8, nl.float32))
        for _ in range(2):  # a constant, unlike a shared_hbm output, may be made in a loop
            rot = nl.shared_constant(str(path))
        a = nl.ndarray((8, 8), dtype=nl.float32, buffer=nl.sbuf)
        b = nl.ndarray((8, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=ident)
        nisa.dma_copy(dst=b, src=rot)
        nisa.tensor_tensor(dst=a, data1=a, data2=b, op=nl.add)
        nisa.dma_copy(dst=out, src=a)
        return out

    np.testing.assert_array_equal(nki.simulate(kernel)(np.zeros((1, 1), np.float32)), np.eye(8) + rotation)
    with pytest.raises(ValueError, match=r"shared_constant reads a numpy .npy file, got 'x.txt'"):
        nki.simulate(lambda x: nki.builtin.lang.shared_constant("x.txt"))(np.zeros((1, 1), np.float32))
    with pytest.raises(ValueError, match="builtin.lang.identity takes a positive matrix size, got 0"):
        nki.builtin.lang.identity(0)


# --- the pytest plugin's stand-ins -------------------------------------------------------------------------

def test_lock_protocol_types_and_hardware_paths() -> None:
    LockStatus, LockResult = remote_lock_scripts.LockStatus, remote_lock_scripts.LockResult
    assert [LockStatus.from_exit_code(s.exit_code) for s in LockStatus] == list(LockStatus)
    assert LockStatus.from_exit_code(1) is LockStatus.ERROR
    result = LockResult(status=LockStatus.ALLOCATED, cores=[0, 1], max_lock_expiry=12, message="ok")
    assert LockResult.from_json(result.to_json()) == result
    with pytest.raises(HardwarePathUnavailable, match="no host to lock"):
        remote_lock_scripts.main()
    with pytest.raises(HardwarePathUnavailable, match="needs the Neuron compiler's trace and a device profile"):
        perf_analysis_private.analyze_trace(input_file="t.json", profiled_file="p.json", subgraph="sg00",
                                            base_dir=".", output_filename="a.log", target_instance_family="trn2")


def _write(root: Path, files: dict) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def test_plugin_supplies_the_missing_harness_modules_and_the_checkouts_files_win(tmp_path: Path) -> None:
    _write(tmp_path, {
        "test/__init__.py": "", "test/utils/__init__.py": "",
        "test/utils/test_orchestrator.py": "class Orchestrator:\n    pass\n",
        "other/test/__init__.py": "", "other/test/utils/__init__.py": "",
        "other/test/utils/perf_analysis_private.py": "def analyze_trace(**kw):\n    return 'the checkout'\n",
    })
    code = """
        import sys
        sys.path.insert(0, {root!r})
        from torchneuron_ext.compat import nki_library
        nki_library.activate()
        from test.utils.scripts.remote_lock_scripts import LockResult, LockStatus
        import test.utils.perf_analysis_private as p
        print(LockStatus.__module__, p.__name__, p.__file__ is None or 'torchneuron_ext' in p.__file__)
        import test.utils.test_orchestrator as o
        print(nki_library.default_missing_harness_attributes(), o.Orchestrator._compiled_kernel,
              nki_library.default_missing_harness_attributes())
    """
    r = run_python(code.format(root=str(tmp_path)))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "torchneuron_ext.compat.nki_library_harness.remote_lock_scripts "
        "torchneuron_ext.compat.nki_library_harness.perf_analysis_private True",
        "['test.utils.test_orchestrator.Orchestrator._compiled_kernel'] None []"]
    # a checkout that has the file keeps its own
    r = run_python(code.format(root=str(tmp_path / "other")).split("import test.utils.test_orchestrator")[0]
                   .replace("print(LockStatus.__module__, p.__name__, ", "print(p.analyze_trace(), "))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[:2] == ["the", "checkout"]


# --- the runner -----------------------------------------------------------------------------------------

_FAKE_CHECKOUT = {
    # the harness's shape: options and markers from test/, tests under test/integration/<package>/...
    "test/__init__.py": "",
    "test/pytest.ini": "[pytest]\nmarkers =\n    fast: fast tests\n",
    "test/conftest.py": """
        def pytest_addoption(parser):
            parser.addoption("--test-mode", action="store")
    """,
    "test/integration/__init__.py": "",
    "test/integration/alpha/__init__.py": "",
    "test/integration/alpha/test_x.py": """
        import pytest

        @pytest.mark.fast
        def test_passes(request):
            assert request.config.getoption("--test-mode") == "simulation"

        @pytest.mark.fast
        def test_fails():
            assert 1 == 2

        def test_not_fast():
            pass
    """,
    "test/integration/nkilib/__init__.py": "",
    "test/integration/nkilib/core/__init__.py": "",
    "test/integration/nkilib/core/beta/__init__.py": "",
    "test/integration/nkilib/core/beta/deeper/__init__.py": "",
    "test/integration/nkilib/core/beta/deeper/test_y.py": """
        import pytest
        import neuron_dtypes  # the aliases are on in the run
        import nki

        @pytest.mark.fast
        def test_simulate_is_there():
            assert nki.cpu_simulate is nki.simulate

        @pytest.mark.fast
        def test_skipped():
            pytest.skip("not here")

        @nki.jit
        def double(src):
            out = nki.language.ndarray(src.shape, dtype=src.dtype, buffer=nki.language.shared_hbm)
            t = nki.language.ndarray(src.shape, dtype=src.dtype, buffer=nki.language.sbuf)
            nki.isa.dma_copy(dst=t, src=src)
            nki.isa.tensor_scalar(dst=t, data=t, op0=nki.language.multiply, operand0=2.0)
            nki.isa.dma_copy(dst=out, src=t)
            return out

        @pytest.mark.fast
        def test_launches_twice():
            import numpy as np
            x = np.ones((128, 64), np.float32)
            for _ in range(2):
                assert (nki.simulate(double)(x) == 2).all()
    """,
    "test/integration/nkilib/core/gamma/__init__.py": "",
    "test/integration/nkilib/core/gamma/test_broken.py": "import a_module_that_does_not_exist\n",
}


def test_runner_counts_outcomes_per_folder_on_a_fake_checkout(tmp_path: Path) -> None:
    _write(tmp_path, _FAKE_CHECKOUT)
    out = io.StringIO()
    junit = tmp_path / "report.xml"
    status = runner.run(str(tmp_path), junit_xml=str(junit), slowest=2, markdown=True, out=out)
    assert status == 1, out.getvalue()  # pytest's: tests failed
    # a module that fails to import is an error of its folder; the other folders still run
    lines = out.getvalue().splitlines()
    assert lines[:2] == ["| folder | passed | failed | errors | skipped | total | seconds |", "|---|---|---|---|---|---|---|"]
    assert [row.split(" | ")[:6] for row in lines[2:6]] == [
        ["| alpha", "1", "1", "0", "0", "2"], ["| core/beta", "2", "0", "0", "1", "3"],
        ["| core/gamma", "0", "0", "1", "0", "1"], ["| total", "3", "1", "1", "1", "6"]]
    assert lines[6].startswith("wall time ") and lines[7].startswith("slowest 2 (wall; then the simulator's")
    assert lines[10] == "no test took over the 30 s budget"  # the default budget, after the slowest
    # the package the broken module imports is named at the end (compat/nki_library_packages.py)
    assert lines[-3:-1] == ["AWS's NKI Library tests need 1 package(s) this environment lacks:",
                            "  a_module_that_does_not_exist  test/integration/nkilib/core/gamma/test_broken.py:1 "
                            "(tests importing it are collection errors)"]
    cases = {o.nodeid: o for o in runner.read_junit(str(junit), str(tmp_path))}
    outcomes = {nodeid: o.outcome for nodeid, o in cases.items()}
    assert outcomes["test/integration/nkilib/core/gamma/test_broken.py"] == "error"
    assert outcomes["test/integration/alpha/test_x.py::test_fails"] == "failed"
    # the plugin's split of each test's time: the simulator's launches, and the rest (the harness)
    launching = cases["test/integration/nkilib/core/beta/deeper/test_y.py::test_launches_twice"]
    assert 0 < launching.simulator_seconds <= launching.seconds
    assert launching.harness_seconds == pytest.approx(launching.seconds - launching.simulator_seconds)
    assert launching.simulator_cpu_seconds > 0 and launching.cpu_seconds >= launching.simulator_cpu_seconds
    idle = cases["test/integration/alpha/test_x.py::test_fails"]
    assert idle.simulator_seconds == 0 and idle.harness_seconds == idle.seconds
    assert cases["test/integration/nkilib/core/gamma/test_broken.py"].simulator_seconds is None


def test_runner_counts_with_pytest_arguments_passed_through(tmp_path: Path) -> None:
    _write(tmp_path, _FAKE_CHECKOUT)
    (tmp_path / "test/integration/nkilib/core/gamma/test_broken.py").unlink()
    out = io.StringIO()
    junit = tmp_path / "report.xml"
    status = runner.run(str(tmp_path), extra=["-p", "no:randomly"], junit_xml=str(junit), slowest=2, out=out)
    assert status == 1, out.getvalue()  # one test failed
    outcomes = runner.read_junit(str(junit), str(tmp_path))
    assert sorted((o.nodeid.split("::")[-1], o.outcome) for o in outcomes) == [
        ("test_fails", "failed"), ("test_launches_twice", "passed"), ("test_passes", "passed"),
        ("test_simulate_is_there", "passed"), ("test_skipped", "skipped")]
    counts = runner.count_by_folder(outcomes)
    assert {f: (c.passed, c.failed, c.error, c.skipped) for f, c in counts.items()} == {
        "alpha": (1, 1, 0, 0), "core/beta": (2, 0, 0, 1)}
    lines = out.getvalue().splitlines()
    assert lines[0].split() == ["folder", "passed", "failed", "errors", "skipped", "total", "seconds"]
    assert [line.split()[:6] for line in lines[1:4]] == [
        ["alpha", "1", "1", "0", "0", "2"], ["core/beta", "2", "0", "0", "1", "3"], ["total", "3", "1", "0", "1", "5"]]
    assert lines[5].startswith("slowest 2 (wall;")
    assert all(" simulator " in line and " harness " in line for line in lines[6:8])
    # -m from the caller overrides the default -m fast
    runner.run(str(tmp_path), extra=["-m", "not fast"], junit_xml=str(junit), out=io.StringIO())
    assert [o.nodeid.split("::")[-1] for o in runner.read_junit(str(junit), str(tmp_path))] == ["test_not_fast"]


_WRITES_ARTIFACTS = {
    # the harness's artifact paths (test.utils.feature_flag_helper), reduced to what the plugin calls
    "test/utils/__init__.py": "",
    "test/utils/feature_flag_helper.py": """
        import os, re

        def resolve_base_output_directory(config):
            return os.path.abspath(config.getoption("--output-directory"))

        def construct_test_output_directory_name():
            test_id = os.environ["PYTEST_CURRENT_TEST"].split("::")[-1].rsplit(" ", 1)[0]
            return "out-" + re.sub(r"[^A-Za-z0-9]+", "_", test_id)
    """,
    "test/conftest.py": """
        import test.utils.feature_flag_helper

        def pytest_addoption(parser):
            parser.addoption("--test-mode", action="store")
            parser.addoption("--output-directory", default="neuron_test_output")
    """,
    "test/integration/alpha/test_x.py": """
        import os
        import pytest
        from test.utils import feature_flag_helper as f

        @pytest.mark.fast
        def test_writes(request):
            d = os.path.join(f.resolve_base_output_directory(request.config),
                             f.construct_test_output_directory_name())
            os.makedirs(d)
            open(os.path.join(d, "inp-x-000.bin"), "wb").write(bytes(1000))
    """,
}


def test_each_tests_harness_files_are_removed_unless_kept(tmp_path: Path) -> None:
    _write(tmp_path, {**_FAKE_CHECKOUT, **_WRITES_ARTIFACTS})
    (tmp_path / "test/integration/nkilib/core/gamma/test_broken.py").unlink()
    out_dir = tmp_path / "artifacts"
    for extra, kept in (([], False), (["--keep-test-output"], True)):
        runner.run(str(tmp_path), extra=["--output-directory", str(out_dir), *extra, "-k", "test_writes"],
                   junit_xml=str(tmp_path / "report.xml"), out=io.StringIO())
        outcomes = runner.read_junit(str(tmp_path / "report.xml"), str(tmp_path))
        assert [o.outcome for o in outcomes] == ["passed"]
        assert sorted(p.name for p in out_dir.iterdir()) == (["out-test_writes"] if kept else [])


_SKIPS_CHECKOUT = {
    # skips made as AWS's harness makes them: a mark added at collection by the conftest (its slow-simulation
    # skip by test name), and pytest.skip in a test's body (its parameter combinations it does not run)
    "test/__init__.py": "",
    "test/pytest.ini": "[pytest]\nmarkers =\n    fast: fast tests\n",
    "test/conftest.py": """
        import pytest

        def pytest_addoption(parser):
            parser.addoption("--test-mode", action="store")

        def pytest_collection_modifyitems(config, items):
            for item in items:
                if "4096" in item.name:
                    item.add_marker(pytest.mark.skip(reason="Skipping slow simulation test"))
    """,
    "test/integration/__init__.py": "",
    "test/integration/nkilib/__init__.py": "",
    "test/integration/nkilib/core/__init__.py": "",
    "test/integration/nkilib/core/delta/__init__.py": "",
    "test/integration/nkilib/core/delta/test_d.py": """
        import pytest

        @pytest.mark.fast
        @pytest.mark.parametrize("n", [128, 4096, 8192])
        @pytest.mark.parametrize("in_sbuf", [0, 1])
        def test_shape(n, in_sbuf):
            if in_sbuf and n > 128:
                pytest.skip("output_in_sbuf requires n <= 128 | one combination")
    """,
    "test/integration/nkilib/experimental/__init__.py": "",
    "test/integration/nkilib/experimental/eps/__init__.py": "",
    "test/integration/nkilib/experimental/eps/test_e.py": """
        import pytest

        @pytest.mark.fast
        @pytest.mark.parametrize("n", [4096])
        def test_big(n):
            pass

        @pytest.mark.fast
        @pytest.mark.parametrize("n", [])
        def test_empty(n):
            pass
    """,
}


class TestSkipReasons(TestCase):
    def test_skips_are_counted_per_folder_and_reason(self) -> None:
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            _write(Path(tmp), _SKIPS_CHECKOUT)
            junit = os.path.join(tmp, "report.xml")
            out = io.StringIO()
            assert runner.run(tmp, junit_xml=junit, slowest=0, out=out) == 0, out.getvalue()
            outcomes = runner.read_junit(junit, tmp)
            self.assertEqual(runner.skips_by_reason(outcomes), {
                ("core/delta", "Skipping slow simulation test"): 2,
                ("core/delta", "output_in_sbuf requires n <= 128 | one combination"): 1,
                ("experimental/eps", "Skipping slow simulation test"): 1,
                ("experimental/eps", "got empty parameter set for (n)"): 1})
            assert {o.reason for o in outcomes if o.outcome == "passed"} == {""}
            text = out.getvalue()
            self.assertExpectedInline(text[text.index("skipped, by"):], """\
skipped, by folder and reason:
      2  core/delta  Skipping slow simulation test
      1  core/delta  output_in_sbuf requires n <= 128 | one combination
      1  experimental/eps  Skipping slow simulation test
      1  experimental/eps  got empty parameter set for (n)
""")
            markdown = runner.format_report(outcomes, 1.0, slowest=0, markdown=True)
            self.assertExpectedInline(markdown[markdown.index("| folder | skip"):], """\
| folder | skip reason | skipped |
|---|---|---|
| core/delta | Skipping slow simulation test | 2 |
| core/delta | output_in_sbuf requires n <= 128 / one combination | 1 |
| experimental/eps | Skipping slow simulation test | 1 |
| experimental/eps | got empty parameter set for (n) | 1 |
""")


class TestBudget(TestCase):
    """Tests over the time budget are listed by what bounds them."""

    @staticmethod
    def _case(name: str, seconds: float, simulator: "float | None", cpu: "float | None") -> runner.Outcome:
        return runner.Outcome(f"test/integration/nkilib/core/moe/test_m.py::{name}", "test/integration/nkilib/core/"
                              "moe/test_m.py", "passed", seconds, simulator_seconds=simulator,
                              simulator_cpu_seconds=simulator, cpu_seconds=cpu)

    def test_each_test_over_the_budget_is_put_with_its_bound(self) -> None:
        outcomes = [self._case("harness_bound", 79.0, 15.0, 85.0),   # 64 s outside the launches
                    self._case("cpu_bound", 45.0, 28.0, 69.5),       # 69.5 s CPU on 2 CPUs: 34.75 s at best
                    self._case("simulator_bound", 41.0, 28.0, 47.5),  # 23.75 s on 2 CPUs: the simulator decides
                    self._case("unsplit", 31.0, None, None),
                    self._case("fast", 29.0, 20.0, 60.0)]
        groups = runner.over_budget(outcomes, 30.0, cpus=2)
        self.assertEqual({k: [o.nodeid.split("::")[1] for o in v] for k, v in groups.items()},
                         {"harness": ["harness_bound"], "cpu": ["cpu_bound"], "simulator": ["simulator_bound"],
                          "unsplit": ["unsplit"]})
        # on 4 CPUs the same CPU time no longer rules the second test out
        self.assertEqual([o.nodeid.split("::")[1] for o in runner.over_budget(outcomes, 30.0, cpus=4)["simulator"]],
                         ["cpu_bound", "simulator_bound"])
        text = runner.format_report(outcomes, 1.0, slowest=0, budget=30.0, cpus=2)
        self.assertExpectedInline(text[text.index("over the"):], """\
over the 30 s budget: 4 of 5 tests
      1  AWS's harness alone took longer (the test's time outside the simulator's launches):
            79.00 s  simulator   15.0 /  15.0 s  harness   64.0 s  cpu   85.0 s  test/integration/nkilib/core/moe/test_m.py::harness_bound
      1  the test's CPU time over the 2 CPU(s) this process may use is longer (even with every CPU busy throughout):
            45.00 s  simulator   28.0 /  28.0 s  harness   17.0 s  cpu   69.5 s  test/integration/nkilib/core/moe/test_m.py::cpu_bound
      1  the simulator's launches make the difference:
            41.00 s  simulator   28.0 /  28.0 s  harness   13.0 s  cpu   47.5 s  test/integration/nkilib/core/moe/test_m.py::simulator_bound
      1  no split recorded (the plugin was not loaded, or the test never started):
            31.00 s  (no split recorded)                                        test/integration/nkilib/core/moe/test_m.py::unsplit
""")

    def test_no_test_over_the_budget_and_no_budget(self) -> None:
        outcomes = [self._case("fast", 29.0, 20.0, 60.0)]
        self.assertEqual(runner.format_budget(outcomes, 30.0, cpus=2), ["no test took over the 30 s budget"])
        self.assertNotIn("budget", runner.format_report(outcomes, 1.0, slowest=1, budget=0))
        self.assertNotIn("budget", runner.format_report(outcomes, 1.0, slowest=1))


def test_folder_of() -> None:
    assert runner.folder_of("test/integration/nkilib/core/moe/moe_cte/test_x.py") == "core/moe"
    assert runner.folder_of("test/integration/nkilib/experimental/conv/test_conv1d.py") == "experimental/conv"
    assert runner.folder_of("test/integration/alpha/test_x.py") == "alpha"
    assert runner.folder_of("test/integration/nkilib/core/moe/moe_cte/test_x.py", depth=3) == "core/moe/moe_cte"


@pytest.mark.parametrize("budget", ["-1", "soon", "nan", "inf"])
def test_a_budget_that_is_no_duration_is_refused_by_name(budget: str, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exit_:
        runner.main(["a-checkout", "--budget", budget])
    assert exit_.value.code == 2
    assert f"argument --budget: {budget!r} is not a number of seconds (0 or more; 0 leaves the list out)" in \
        capsys.readouterr().err


def test_runner_refuses_a_folder_that_is_no_checkout(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert runner.main([str(tmp_path)]) == 2
    assert "is not a checkout of AWS's NKI Library (it has no test/integration folder)" in capsys.readouterr().err


def test_the_command_line_subcommand(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from torchneuron_ext import cli
    assert runner.split_pytest_args(["x", "--select", "a", "--", "-m", "not fast", "--"]) == (
        ["x", "--select", "a"], ["-m", "not fast", "--"])
    assert cli.main(["nki-library", str(tmp_path), "--slowest", "3", "--", "-k", "x"]) == 2
    assert f"torchneuron-ext nki-library: {tmp_path} is not a checkout" in capsys.readouterr().err


class TestRunnerSourceProblems(TestCase):
    def test_a_file_that_does_not_parse_is_named_with_its_line(self) -> None:
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            _write(Path(tmp), {
                "pyproject.toml": '[project]\nname = "x"\nrequires-python = ">=3.10"\n',
                "src/pkg/good.py": "x = 1\n",
                "src/pkg/bad.py": 'def f():\n    """doc"""\n\n        more doc\n',
                "test/integration/t/test_z.py": "import pytest\n",
            })
            problems = runner.source_problems(tmp)
            self.assertEqual(problems, [runner.SourceProblem("src/pkg/bad.py", 4, "IndentationError: unexpected indent")])
            self.assertEqual(runner.requires_python(tmp), ">=3.10")
            self.assertExpectedInline(runner.format_source_problems(problems, ">=3.10", (3, 11, 7)), """\
1 source file(s) do not parse with Python 3.11.7 (Python 3.11.7 meets the checkout's requires-python '>=3.10', so these files are at fault, not the Python version); tests importing them are collection errors:
  src/pkg/bad.py:4: IndentationError: unexpected indent
""")
            self.assertExpectedInline(runner.format_source_problems(problems, ">=3.12", (3, 11, 7)), """\
1 source file(s) do not parse with Python 3.11.7 (Python 3.11.7 does not meet the checkout's requires-python '>=3.12': run with a Python that does); tests importing them are collection errors:
  src/pkg/bad.py:4: IndentationError: unexpected indent
""")
            self.assertIn("states no requires-python this runner can read ('~=3.12')",
                          runner.format_source_problems(problems, "~=3.12", (3, 11, 7)))
            self.assertEqual(runner.format_source_problems([], ">=3.10"), "")
            # only the selection (and src) is parsed
            self.assertEqual(runner.source_problems(tmp, ["test/integration/t"])[0].file, "src/pkg/bad.py")

    def test_a_module_the_tree_lacks_is_named_with_where_its_file_is(self) -> None:
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            _write(Path(tmp), {
                "src/lib/__init__.py": "",
                "src/lib/core/__init__.py": "from .kern import k\nfrom ..moved import gone\n",
                "src/lib/core/kern.py": "import numpy\nk = 1\n",
                "src/lib/collectives/topk.py": "t = 1\n",
                "test/integration/t/test_z.py": ("import pytest\nfrom lib.core.kern import k\n"
                                                 "from lib.subkernels.topk import t\nimport lib.core\n"),
            })
            missing = runner.missing_modules(tmp)
            self.assertEqual([(m.file, m.line, m.module) for m in missing], [
                ("src/lib/core/__init__.py", 2, "lib.moved"),
                ("test/integration/t/test_z.py", 3, "lib.subkernels.topk")])
            self.assertExpectedInline(runner.format_missing_modules(missing), """\
AWS's tree lacks 2 module(s) its files import; tests importing them are collection errors:
  src/lib/core/__init__.py:2: lib.moved
  test/integration/t/test_z.py:3: lib.subkernels.topk (a file of that name is at src/lib/collectives/topk.py)
""")
            self.assertEqual(runner.format_missing_modules([]), "")
            # a node id selects its file; both checks can share one scan
            scanned = runner.scan_sources(tmp, ["test/integration/t/test_z.py::TestZ::test_q[1-2]"])
            self.assertEqual([(m.file, m.module) for m in runner.missing_modules(tmp, (), scanned)],
                             [("src/lib/core/__init__.py", "lib.moved"),
                              ("test/integration/t/test_z.py", "lib.subkernels.topk")])
            self.assertEqual(runner.source_problems(tmp, (), scanned), [])
