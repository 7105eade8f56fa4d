"""pytest plugin: run TorchNeuron's own test suite (a checkout outside this repository) on the emulator.

    cd <checkout> && python -m pytest -p torchneuron_ext.compat.testing.torchneuron_suite tests/device

(``python -m torchneuron_ext.compat.testing.run_suite <checkout>`` runs every folder this way and counts.) It maps
what a Trainium host provides and the emulator does differently:

- the single-core assumption: ``NEURON_RT_NUM_CORES=1``, as the suite's conftest sets on hardware (it skips
  that on a machine without /dev/neuron0), unless every test collected is distributed, marked
  ``multi_device`` or in an ``_all_cores`` file (as in the suite's conftest);
- ``NEURON_LAUNCH_BLOCKING=1``: the emulator executes synchronously (tests of the asynchronous error
  pipeline skip themselves);
- ``TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS=0``: the emulator's errors are the CPU kernels'
  messages, which the suite expects (``match_cpu``) in that mode;
- ``TORCH_NEURONX_MLIR_ATEN_OPS=1``, the value TorchNeuron's import sets, which tests read directly;
- ``TORCHNEURON_EXT_RNG=cpu``: random ops on neuron draw from the CPU's default generator, as TorchNeuron's
  CPU-fallback random ops do (tests seed once, draw on CPU, then ``randn_like`` a neuron tensor and compare
  with the CPU run; the suite's one test of a device generator is an xfail for that reason);
- ``torch_neuronx``, ``neuronxcc.nki`` and ``nki`` resolve to torchneuron_ext (torch_neuronx even when a
  TorchNeuron source tree is on sys.path), and ``TORCHNEURON_EXT_NKI_COMPAT=1`` for spawned ranks;
- ``torch._dynamo.reset()`` before each test (the suite's conftest does it only on hardware);
- pytest-xdist's ``worker_id`` fixture (``"master"``) when xdist is not installed;
- a per-test timeout (``--tnx-timeout``, seconds, default 300; 0 turns it off).

Tests that need what the emulator deliberately lacks are reported as skipped, with the reason: those
whose module or body reaches an out-of-scope part of TorchNeuron (its errors name the limitation, see
torchneuron_ext/compat/torch_neuronx/_scope.py), and those listed in out_of_scope.py (about hardware, neuronx-cc,
NEFF caches, XLA/JAX or StableHLO). ``--tnx-report FILE`` writes per-file counts as JSON.
"""
from __future__ import annotations

import collections
import importlib.util
import json
import os
import re
import signal
import sys
from typing import Any, Optional

import pytest

ENV_MAPPING = {
    "NEURON_RT_NUM_CORES": "1",
    "NEURON_LAUNCH_BLOCKING": "1",
    "TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS": "0",
    "TORCH_NEURONX_MLIR_ATEN_OPS": "1",
    "TORCHNEURON_EXT_NKI_COMPAT": "1",
    "TORCHNEURON_EXT_RNG": "cpu",
}

_IMPORT_NAME = re.compile(r"cannot import name '(\w+)' from '((?:torchneuron_ext\.compat\.)?torch_neuronx[\w.]*)'")
# XLA and JAX, which TorchNeuron lowers through and the emulator does not have: a test that imports them
# itself (not through torch_neuronx, whose modules name the limitation) is out of scope too.
_XLA_MODULE = re.compile(r"No module named '((?:jax|jaxlib|torch_xla|libneuronxla)(?:\.[\w.]+)?)'")


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("torchneuron_suite", "TorchNeuron's test suite on the emulator")
    group.addoption("--tnx-timeout", type=float, default=300.0,
                    help="seconds before a test is failed as hung (0: no timeout)")
    group.addoption("--tnx-report", default=None, help="write per-file counts as JSON to this file")
    group.addoption("--tnx-no-out-of-scope", action="store_true",
                    help="run the tests listed in out_of_scope.py instead of skipping them")


_saved_num_cores: Optional[tuple[Optional[str]]] = None  # set when the mapping set NEURON_RT_NUM_CORES


def _map_environment(args: list[str]) -> None:
    global _saved_num_cores
    paths = [a for a in args if not a.startswith("-")]
    for name, value in ENV_MAPPING.items():
        if name == "NEURON_RT_NUM_CORES":
            if paths and all("_all_cores" in p for p in paths):
                continue  # the suite's conftest leaves the core count alone for these
            _saved_num_cores = (os.environ.get(name),)
        os.environ[name] = value


def _needs_all_cores(item: Any) -> bool:
    """The suite's conftest does not limit the cores when every test is distributed, multi_device or in
    an _all_cores file."""
    path = str(item.path)
    return "distributed" in path or "_all_cores" in path or item.get_closest_marker("multi_device") is not None


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: Any) -> None:
    _map_environment(list(config.args))
    # Set on purpose: no not-applicable notice for them (torch_neuronx/env.py), here or in ranks.
    os.environ["TORCHNEURON_EXT_ENV_ACKNOWLEDGED"] = ",".join(ENV_MAPPING)
    from .. import aliases

    aliases.install()
    aliases.force()
    config._tnx_counts = collections.defaultdict(collections.Counter)
    config._tnx_reasons = collections.Counter()
    config.addinivalue_line("markers", "tnx_out_of_scope(reason): not applicable to the emulated device")


# --------------------------------------------------------------------------- out of scope


def _marker() -> str:
    from ..torch_neuronx._scope import MARKER

    return MARKER


def _out_of_scope_reason(text: str) -> Optional[str]:
    """The limitation a failure's text names, if it is an out-of-scope part of TorchNeuron."""
    marker = _marker()
    for line in text.splitlines():
        if marker in line:
            return re.sub(r"^E\s+", "", line.strip())
    match = _XLA_MODULE.search(text)
    if match:
        return f"XLA/JAX: the test imports {match.group(1)}, which TorchNeuron lowers through and the emulator does not use"
    match = _IMPORT_NAME.search(text)
    if match:  # `from torch_neuronx.x import y`: Python replaced our AttributeError with a plain ImportError
        name, module = match.groups()
        mod = sys.modules.get(module)
        if mod is not None:
            try:
                getattr(mod, name)
            except AttributeError as e:
                if marker in str(e):
                    return str(e)
    return None


def _skip_repr(path: str, reason: str) -> tuple[str, int, str]:
    return (path, 0, f"out of scope: {reason}")


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: Any) -> Any:
    rep = yield
    if rep.failed:
        reason = _out_of_scope_reason(str(rep.longrepr))
        if reason is not None:
            rep.outcome = "skipped"
            rep.longrepr = _skip_repr(str(collector.path), reason)
    return rep


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    global _saved_num_cores
    if _saved_num_cores is not None and items and all(_needs_all_cores(i) for i in items):
        from torchneuron_ext.neuron import is_initialized

        if not is_initialized():  # the core count is fixed when the runtime starts
            previous = _saved_num_cores[0]
            if previous is None:
                os.environ.pop("NEURON_RT_NUM_CORES", None)
            else:
                os.environ["NEURON_RT_NUM_CORES"] = previous
            _saved_num_cores = None
    if config.getoption("--tnx-no-out-of-scope"):
        return
    from .out_of_scope import reason_for

    for item in items:
        reason = reason_for(item.nodeid)
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=f"out of scope: {reason}"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: Any, call: Any) -> Any:
    rep = yield
    if rep.failed and call.excinfo is not None:
        reason = _out_of_scope_reason(f"{call.excinfo.typename}: {call.excinfo.value}")
        if reason is not None:
            rep.outcome = "skipped"
            rep.longrepr = _skip_repr(str(item.path), reason)
    return rep


# --------------------------------------------------------------------------- per-test set-up


class TestTimeout(Exception):
    """A test of the TorchNeuron suite ran longer than --tnx-timeout."""


@pytest.fixture(autouse=True)
def _tnx_per_test(request: Any) -> Any:
    if "torch._dynamo" in sys.modules:
        sys.modules["torch._dynamo"].reset()
    timeout = request.config.getoption("--tnx-timeout")
    use_alarm = timeout and hasattr(signal, "SIGALRM")
    if use_alarm:
        def _expired(signum: int, frame: Any) -> None:
            raise TestTimeout(f"test ran longer than --tnx-timeout={timeout:g}s")

        previous = signal.signal(signal.SIGALRM, _expired)
        signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        yield
    finally:
        if use_alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        torch = sys.modules.get("torch")
        if torch is not None and getattr(torch, "neuron", None) is not None:
            try:
                torch.neuron.set_device(0)
            except Exception:  # noqa: BLE001  (a test may leave no device visible)
                pass


if importlib.util.find_spec("xdist") is None:
    @pytest.fixture(scope="session")
    def worker_id() -> str:
        """pytest-xdist's fixture, as it reads without ``-n`` (the suite's distributed tests ask for it)."""
        return "master"


# --------------------------------------------------------------------------- counts


def _file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def pytest_collectreport(report: Any) -> None:
    config = _config
    if config is None or not report.nodeid.endswith(".py"):
        return
    counts = config._tnx_counts[_file_of(report.nodeid)]
    if report.failed:
        counts["import_error"] += 1
    elif report.skipped:
        counts["import_out_of_scope"] += 1
    else:
        counts["imported"] += 1


def pytest_runtest_logreport(report: Any) -> None:
    config = _config
    if config is None:
        return
    counts = config._tnx_counts[_file_of(report.nodeid)]
    if report.when == "call" or (report.when == "setup" and not report.passed):
        if hasattr(report, "wasxfail"):
            counts["xfailed" if report.skipped else "xpassed"] += 1
        elif report.skipped:
            longrepr = report.longrepr
            reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
            key = "skipped_out_of_scope" if str(reason).startswith(("out of scope", "Skipped: out of scope")) \
                else "skipped"
            counts[key] += 1
        elif report.failed:
            counts["failed" if report.when == "call" else "error"] += 1
        else:
            counts["passed"] += 1
    elif report.when == "teardown" and report.failed:
        counts["error"] += 1


_config: Any = None


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: Any) -> None:
    global _config
    _config = session.config


def pytest_sessionfinish(session: Any) -> None:
    path = session.config.getoption("--tnx-report")
    if path:
        with open(path, "w") as f:
            json.dump({k: dict(v) for k, v in sorted(session.config._tnx_counts.items())}, f, indent=1)
