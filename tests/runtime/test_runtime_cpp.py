"""The simulated runtime (csrc/runtime) built and tested on its own, without PyTorch.

tests/runtime/runtime_tests.cpp is compiled together with csrc/runtime/*.cpp and the torch-free part
of the instrumentation layer (csrc/instrumentation/tracer.cpp) under AddressSanitizer
and UndefinedBehaviorSanitizer and run: device configuration and the current core, the caching
allocator (statistics, reuse, capacity, out of memory, threads), streams and events, and the
tracer's per-thread buffers. About 30 s on two cores, most of it the compile.

On a developer's machine without a compiler or libasan the tests skip; in CI they fail instead, since
CI installs both (g++ brings libasan and libubsan). CI is TORCHNEURON_EXT_CI on (.ci/run sets it; not
`CI` itself, which also changes torch's behaviour) or a CI service's own `CI` on.
"""
import os
import shutil
import subprocess

import pytest

from torchneuron_ext import _env


def _skip_outside_ci(reason: str) -> None:
    if _env.flag("TORCHNEURON_EXT_CI", False) or _env.flag("CI", False, on_error="warn"):
        pytest.fail(f"{reason}; CI installs both (apt-get install g++), so this must not be skipped there")
    pytest.skip(reason)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUNTIME = os.path.join(ROOT, "csrc", "runtime")
TRACER = os.path.join(ROOT, "csrc", "instrumentation", "tracer.cpp")
TESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runtime_tests.cpp")
FLAGS = ["-std=c++20", "-g", "-O1", "-fsanitize=address,undefined", "-fno-sanitize-recover=undefined",
         "-fno-omit-frame-pointer", "-Wall", "-Wno-unused-parameter"]


def _compiler() -> str | None:
    for name in (os.environ.get("CXX"), "g++", "clang++", "c++"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def _clean_env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEURON_RT_", "NEURON_EMU_"))}
    # detect_leaks: the runtime's process-lifetime tables are reachable from globals, so any report is a leak.
    env.update(ASAN_OPTIONS="detect_leaks=1:abort_on_error=0", UBSAN_OPTIONS="print_stacktrace=1", **extra)
    return env


@pytest.fixture(scope="module")
def binary(tmp_path_factory):
    cxx = _compiler()
    if cxx is None:
        _skip_outside_ci("no C++ compiler (g++, clang++ or $CXX) to build the runtime's unit tests")
    sources = sorted(os.path.join(RUNTIME, f) for f in os.listdir(RUNTIME) if f.endswith(".cpp")) + [TRACER]
    out = str(tmp_path_factory.mktemp("runtime_cpp") / "runtime_tests")
    build = subprocess.run([cxx, *FLAGS, "-I", os.path.join(ROOT, "csrc"), TESTS, *sources, "-o", out, "-lpthread"],
                           capture_output=True, text=True, timeout=300)
    if build.returncode != 0 and "asan" in build.stderr.lower() and "cannot find" in build.stderr.lower():
        _skip_outside_ci(f"{cxx} has no AddressSanitizer runtime (libasan): {build.stderr.strip()[-300:]}")
    assert build.returncode == 0, f"building the runtime's unit tests failed:\n{build.stderr[-4000:]}"
    return out


@pytest.mark.parametrize("variable", ["TORCHNEURON_EXT_CI", "CI"])
def test_missing_sanitizers_fail_in_ci(monkeypatch, variable):
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("TORCHNEURON_EXT_CI", raising=False)
    monkeypatch.setenv(variable, "1")
    with pytest.raises(pytest.fail.Exception, match="no C\\+\\+ compiler.*must not be skipped"):
        _skip_outside_ci("no C++ compiler (g++, clang++ or $CXX) to build the runtime's unit tests")
    monkeypatch.setenv(variable, "false")
    with pytest.raises(pytest.skip.Exception, match="no C\\+\\+ compiler"):
        _skip_outside_ci("no C++ compiler (g++, clang++ or $CXX) to build the runtime's unit tests")


def _run(binary: str, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([binary, *args], capture_output=True, text=True, timeout=120, env=_clean_env(**env))


def test_runtime_unit_tests(binary):
    r = _run(binary, NEURON_RT_NUM_CORES="4")
    assert r.returncode == 0, f"runtime unit tests failed (rc {r.returncode}):\n{r.stdout}\n{r.stderr[-6000:]}"
    assert "0 failures" in r.stdout and "ERROR: AddressSanitizer" not in r.stderr
    assert int(r.stdout.split(" tests\n")[0].split("\n")[-1]) >= 20, r.stdout


def test_runtime_invalid_configuration(binary):
    r = _run(binary, "config_error", NEURON_RT_VISIBLE_CORES="0,,1")
    assert r.returncode == 0, f"{r.stdout}\n{r.stderr[-4000:]}"
