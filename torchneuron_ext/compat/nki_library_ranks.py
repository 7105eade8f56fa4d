"""AWS's multi-rank collective tests run on ``nki.launch_ranks``: one simulated worker per rank.

A test of AWS's NKI Library with ``inference_args.collective_ranks > 1`` is, on hardware, one
``neuron-profile`` run with a worker per rank, each with its own inputs (``PerRankLazyInputGenerator``:
the harness's ``--multi-input`` file) and its own outputs (``output_worker_<rank>/``), which the harness's
``OutputValidator`` checks rank by rank. AWS's public simulation path instead calls the simulator once, with
no per-rank inputs, and AWS's simulator has no collectives, so those tests cannot pass there.

``install`` replaces ``Orchestrator._run_simulator_inference`` for multi-rank tests only: it runs the
kernel on ``nki.launch_ranks`` with each rank's inputs and writes each rank's outputs where the hardware
path writes them, then returns to the harness, whose own ``_run_validation`` and ``OutputValidator``
(its tolerances, its choice of ranks: all of them for a per-rank golden, rank 0 for a single golden)
judge them. Single-rank tests take the harness's untouched path.
"""
from __future__ import annotations

import os
import sys
from typing import Any, Callable, Optional

import numpy as np

__all__ = ["HARNESS_NAMES", "install", "missing_harness_names", "rank_inputs", "rank_outputs",
           "simulate_ranks"]

# What the replacement reads from the harness's test_orchestrator module (all imported there).
HARNESS_NAMES = ("INF_ARTIFACT_DIR_NAME", "InferenceException", "MetricName", "PerRankLazyInputGenerator",
                 "normalize_golden_output")
# The graph compiler's marker on arguments an output aliases; the harness strips it before simulating.
_ALIAS_SUFFIX = ".must_alias_input"


def rank_inputs(kernel_input: Any, ranks: int, per_rank_type: type) -> list:
    """Each rank's keyword arguments. A per-rank generator gives rank r ``for_rank(r)``; a plain dict is
    every rank's input, as the hardware path hands every worker the same input files. Each rank gets its
    own copies of the arrays (contiguous, as a worker reads them from its file), so a kernel that writes
    into an input does not write into another rank's."""
    per_rank = [kernel_input.for_rank(r) if isinstance(kernel_input, per_rank_type) else (kernel_input or {})
                for r in range(ranks)]
    return [{name.removesuffix(_ALIAS_SUFFIX): (np.array(value, copy=True, order="C")
                                                if isinstance(value, np.ndarray) else value)
             for name, value in inputs.items()} for inputs in per_rank]


def rank_outputs(outputs: Any, golden: dict, rank: int) -> dict:
    """One rank's results by the golden's names, in the golden's dtypes (what the harness does with a
    single launch's results)."""
    results = [] if outputs is None else list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
    if len(results) != len(golden):
        raise RuntimeError(f"rank {rank}: the kernel returned {len(results)} outputs but the golden names "
                           f"{len(golden)}: {list(golden)}")
    return {name: np.asarray(out, dtype=want.dtype) for (name, want), out in zip(golden.items(), results)}


def simulate_ranks(kernel_under_test: Any, names: dict) -> list:
    """Run a multi-rank test's kernel on ``nki.launch_ranks``; each rank's outputs by name."""
    from ..nki import launch_ranks

    ranks = kernel_under_test.inference_args.collective_ranks
    # The harness selects the NeuronCore version this way before its own simulator launch.
    os.environ["NKI_NC_VERSION"] = kernel_under_test.compiler_input.platform_target.get_nc_gen()
    lnc = kernel_under_test.compiler_input.logical_nc_config
    inputs = rank_inputs(kernel_under_test.kernel_input, ranks, names["PerRankLazyInputGenerator"])
    results = launch_ranks(kernel_under_test.kernel_func[lnc], inputs)
    if kernel_under_test.validation_args is None:
        raise ValueError("Simulation mode requires validation_args to verify outputs")
    golden = kernel_under_test.validation_args.golden_output
    return [rank_outputs(out, names["normalize_golden_output"](golden, rank_id=r), r)
            for r, out in enumerate(results)]


def missing_harness_names(orchestrator: type) -> list:
    """The names the replacement needs that the harness does not have (empty: it can be installed)."""
    module = sys.modules.get(orchestrator.__module__)
    missing = [n for n in HARNESS_NAMES if not hasattr(module, n)]
    missing += [f"Orchestrator.{m}" for m in ("_run_simulator_inference", "__dump_tensors__")
                if not hasattr(orchestrator, m)]
    return missing


def install(orchestrator: type) -> Optional[list]:
    """Route the orchestrator's multi-rank simulations to ``launch_ranks``. None when installed (or already
    installed), else the harness names that are missing (then nothing is changed)."""
    if getattr(orchestrator._run_simulator_inference, "_launch_ranks", False):
        return None
    missing = missing_harness_names(orchestrator)
    if missing:
        return missing
    module = sys.modules[orchestrator.__module__]
    names = {n: getattr(module, n) for n in HARNESS_NAMES}
    single_launch: Callable = orchestrator._run_simulator_inference

    def _run_simulator_inference(self: Any, kernel_under_test: Any) -> Optional[str]:
        if kernel_under_test.inference_args.collective_ranks <= 1:
            return single_launch(self, kernel_under_test)
        collector = self.emitter.get_collector()
        try:
            with collector.timer(names["MetricName"].SIMULATION_TIME):
                per_rank = simulate_ranks(kernel_under_test, names)
            output_path = os.path.join(self.fs_config.artifacts_output_directory_path,
                                       names["INF_ARTIFACT_DIR_NAME"])
            # Where neuron-profile puts a collective run's outputs, and where the validator looks for them.
            for rank, outputs in enumerate(per_rank):
                self.__dump_tensors__(os.path.join(output_path, f"output_worker_{rank}"), outputs, lambda n: n)
            return output_path
        except Exception as e:
            raise names["InferenceException"](str(e)) from e

    _run_simulator_inference._launch_ranks = True  # type: ignore[attr-defined]
    _run_simulator_inference.__wrapped__ = single_launch  # type: ignore[attr-defined]
    orchestrator._run_simulator_inference = _run_simulator_inference
    return None
