"""Run AWS's NKI Library test suite, unmodified, against the NKI simulator: the pytest plugin.

    python -m pytest test/integration -p torchneuron_ext.compat.nki_library --test-mode simulation -m fast

(from a checkout of the NKI Library, with the checkout and its ``src`` on PYTHONPATH). Before the harness's
conftest is imported, the plugin

- installs the product aliases (compat/aliases.py): AWS's harness imports its simulator as
  ``nki_cpu_simulator.nki`` (an internal package name), aliases ``nki``, ``nki.tensor``, ``nki.dtype`` and
  the global ``builtin`` to it, and its golden references use ``neuron_dtypes`` (compat/neuron_dtypes.py);
- supplies the harness files the public tree lacks (compat/nki_library_harness/), only where the checkout
  has no file of that name;
- after the conftest is imported, gives the harness's ``Orchestrator`` the ``_compiled_kernel = None``
  default its simulation path reads but, in public releases up to at least 2026-04-13, never sets (only
  compilation sets it, and simulation mode skips compilation): without it every simulated test fails in
  ``_rename_neff_outputs_to_python_names`` with an AttributeError after the kernel ran. None is what that
  attribute means in simulation mode (no compiled kernel, so no NEFF outputs to rename); a harness that
  sets it itself is left alone;
- runs the multi-rank collective tests (``inference_args.collective_ranks > 1``) on ``nki.launch_ranks``,
  one worker per rank with that rank's inputs, and leaves their validation to the harness
  (compat/nki_library_ranks.py): the public harness gives its simulator one launch with no per-rank inputs,
  and AWS's simulator has no collectives. ``--single-launch-collectives`` keeps the harness's own path;
- records, per test, how much of its time the simulator's launches took (``nki.kernel.launch_clock``) and the
  process CPU time of the whole test, as JUnit properties the runner reports beside each slow test (so a
  test's time splits into the simulator's and AWS's harness's: inputs, goldens, comparison);
- removes the files the harness writes for each test (its inputs, goldens and outputs under
  ``--output-directory``) when the test ends, unless ``--keep-test-output``.

Nothing in the checkout is modified. ``torchneuron-ext nki-library CHECKOUT`` (or
``python -m torchneuron_ext.compat.nki_library CHECKOUT``) runs the suite this way and reports the
outcomes per folder (compat/nki_library_runner.py).
"""
from __future__ import annotations

import os
import shutil
import sys
import time
from typing import Any, Optional

import pytest

from . import aliases, nki_library_ranks
from .nki_library_harness import MODULES
from .nki_library_runner import LAUNCHES, SIMULATOR_CPU, SIMULATOR_WALL, TEST_CPU

__all__ = ["activate"]


def activate() -> None:
    """Install the aliases and the missing harness modules (what the plugin does; usable without pytest)."""
    aliases.install()
    aliases.supply_missing(MODULES)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: Any, parser: Any, args: Any) -> None:
    # The harness's conftest imports test.utils.test_orchestrator (hence perf_analysis_private) and, in
    # simulation mode, nki_cpu_simulator when it is loaded, so this runs before any conftest.
    activate()


HARNESS_ORCHESTRATOR = "test.utils.test_orchestrator"


def default_missing_harness_attributes() -> list:
    """Give the harness classes the attribute defaults their simulation path needs (see the module
    docstring); returns what was set, as "module.Class.attribute"."""
    done = []
    orchestrator = getattr(sys.modules.get(HARNESS_ORCHESTRATOR), "Orchestrator", None)
    if orchestrator is not None and not hasattr(orchestrator, "_compiled_kernel"):
        orchestrator._compiled_kernel = None
        done.append(f"{HARNESS_ORCHESTRATOR}.Orchestrator._compiled_kernel")
    return done


SINGLE_LAUNCH_OPTION = "--single-launch-collectives"
KEEP_OUTPUT_OPTION = "--keep-test-output"
HARNESS_PATHS = "test.utils.feature_flag_helper"


def pytest_addoption(parser: Any) -> None:
    parser.addoption(SINGLE_LAUNCH_OPTION, action="store_true", default=False,
                     help="torchneuron_ext: run multi-rank collective tests as AWS's public harness does (one "
                          "simulator launch, no per-rank inputs) instead of one nki.launch_ranks worker per rank")
    parser.addoption(KEEP_OUTPUT_OPTION, action="store_true", default=False,
                     help="torchneuron_ext: keep each test's inputs and outputs the harness writes under "
                          "--output-directory (by default they are removed when the test ends)")


def test_output_directory(config: Any) -> Optional[str]:
    """The directory the harness wrote the running test's artifacts to (None: not this harness)."""
    paths = sys.modules.get(HARNESS_PATHS)
    name = getattr(paths, "construct_test_output_directory_name", None)
    base = getattr(paths, "resolve_base_output_directory", None)
    if name is None or base is None or "PYTEST_CURRENT_TEST" not in os.environ:
        return None
    return os.path.join(base(config), name())


def _clock_reading() -> tuple:
    from ..nki.kernel import launch_clock
    return (*launch_clock.reading(), time.process_time())


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: Any) -> None:
    item.stash[_CLOCK_AT_START] = _clock_reading()


def record_times(item: Any) -> None:
    """Append the test's simulator and CPU seconds (since its setup began) to its JUnit properties."""
    start = item.stash.get(_CLOCK_AT_START, None)
    if start is None:
        return
    launches, wall, cpu, process = (b - a for a, b in zip(start, _clock_reading()))
    item.user_properties += [(LAUNCHES, launches), (SIMULATOR_WALL, f"{wall:.3f}"),
                             (SIMULATOR_CPU, f"{cpu:.3f}"), (TEST_CPU, f"{process:.3f}")]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: Any, nextitem: Any) -> Any:
    # The harness writes every test's inputs, goldens and outputs as files and never removes them: about
    # 70 GB over the fast selection, enough to fill a disk mid-run.
    # Named before the teardown runs: pytest clears PYTEST_CURRENT_TEST, which the harness names it from,
    # at the teardown's end.
    directory = None if item.config.getoption(KEEP_OUTPUT_OPTION) else test_output_directory(item.config)
    yield
    if directory is not None and os.path.isdir(directory):
        shutil.rmtree(directory, ignore_errors=True)
    # After the teardown ran and before its report is made: the report copies the item's properties.
    record_times(item)


def launch_collectives_per_rank() -> str:
    """Route the harness's multi-rank simulations to nki.launch_ranks; what was done, for the header."""
    orchestrator = getattr(sys.modules.get(HARNESS_ORCHESTRATOR), "Orchestrator", None)
    if orchestrator is None:
        return ""
    missing = nki_library_ranks.install(orchestrator)
    if missing:
        return (f"multi-rank tests left on the harness's single launch: it lacks {', '.join(missing)} "
                f"(compat/nki_library_ranks.py)")
    return f"multi-rank tests run on nki.launch_ranks, one worker per rank ({SINGLE_LAUNCH_OPTION}: not)"


def pytest_configure(config: Any) -> None:
    # Runs once the initial conftests (the harness's among them) are imported.
    for name in default_missing_harness_attributes():
        config.stash[_DEFAULTED] = config.stash.get(_DEFAULTED, []) + [name]
    if not config.getoption(SINGLE_LAUNCH_OPTION):
        config.stash[_RANKS] = launch_collectives_per_rank()


def pytest_report_header(config: Any) -> list:
    defaulted = config.stash.get(_DEFAULTED, [])
    ranks = config.stash.get(_RANKS, "")
    return [f"torchneuron_ext NKI simulator: AWS harness run against torchneuron_ext.nki"
            + (f"; defaulted {', '.join(defaulted)} = None (see compat/nki_library.py)" if defaulted else "")
            + (f"; {ranks}" if ranks else "")]


_DEFAULTED = pytest.StashKey[list]()
_CLOCK_AT_START = pytest.StashKey[tuple]()
_RANKS = pytest.StashKey[str]()


if __name__ == "__main__":
    from .nki_library_runner import main
    sys.exit(main())
