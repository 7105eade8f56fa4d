"""The ways to run a kernel: jit, simulate_kernel, simulate, baremetal, benchmark, profile.

On this machine every mode runs the simulator on the host (there is no NeuronCore to run a NEFF on);
``benchmark`` adds a latency estimate from the documented cost model (cost_model.py).
"""
from __future__ import annotations

import functools
import json
import os
from typing import Any, Callable, Optional

from . import schedule as _schedule
from . import trace as _trace
from .kernel import GridKernel, Kernel, LaunchResult, as_kernel, normalize_grid

# Every mode the toolchains accept. Here all of them run the kernel in the simulator when it is called:
# "trace" (a sub-kernel traced into its caller) runs inline when called from a kernel and as its own
# launch otherwise; "simulation", "baremetal", "auto", "numpy", "torch", "jax", "torchxla" run it;
# "benchmark" also estimates its latency (see BenchmarkKernel).
_MODES = {"auto", "trace", "jax", "torchxla", "baremetal", "benchmark", "simulation", "torch", "numpy"}


def make_jit(dialect: str) -> Callable:
    def jit(func: Optional[Callable] = None, mode: str = "auto", **options: Any) -> Any:
        """Make ``func`` an NKI kernel, callable with numpy arrays, CPU tensors or neuron tensors."""
        if mode not in _MODES:
            raise ValueError(f"nki.jit mode must be one of {sorted(_MODES)}, got {mode!r}")

        def wrap(f: Callable) -> Kernel:
            if mode == "benchmark":
                return make_benchmark(dialect)(f, **options)
            return Kernel(f, dialect=dialect, mode=mode, **options)
        return wrap if func is None else wrap(func)
    jit.__doc__ = f"``nki.jit`` ({dialect} dialect): decorate a kernel function."
    return jit


def make_simulate_kernel(dialect: str) -> Callable:
    def simulate_kernel(kernel: Any, *args: Any, **kwargs: Any) -> Any:
        """Run ``kernel`` (optionally ``kernel[grid]``) on numpy arrays in the simulator; returns numpy."""
        k, grid = as_kernel(kernel, dialect)
        return GridKernel(k, grid)(*args, **kwargs)
    return simulate_kernel


class SimulatedKernel:
    """What ``nki.simulate(kernel)`` returns: call it to run the kernel in the simulator, or index it with the
    LNC degree first (``nki.simulate(kernel)[2](...)``, the form AWS's harness uses, is
    ``nki.simulate(kernel[2])(...)``). Arguments may be positional or by parameter name."""

    def __init__(self, kernel: Kernel, grid: tuple) -> None:
        functools.update_wrapper(self, kernel.func)
        self.kernel, self.grid = kernel, grid

    def __getitem__(self, lnc: Any) -> "SimulatedKernel":
        if self.grid:
            raise TypeError(f"nki.simulate: the kernel {self.kernel.__name__} is already bound to "
                            f"{list(self.grid)}; index it once")
        return SimulatedKernel(self.kernel, normalize_grid(lnc, self.kernel.dialect))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return GridKernel(self.kernel, self.grid)(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<simulated NKI kernel {self.kernel.__name__}{list(self.grid) if self.grid else ''}>"


def make_simulate(dialect: str) -> Callable:
    def simulate(kernel: Any) -> SimulatedKernel:
        """``nki.simulate(kernel)(*args)``, ``nki.simulate(kernel)[2](*args)`` or ``nki.simulate(kernel[2])(*args)``:
        numpy or torch arguments, positional or by name."""
        k, grid = as_kernel(kernel, dialect)
        return SimulatedKernel(k, grid)
    return simulate


def make_baremetal(dialect: str) -> Callable:
    def baremetal(kernel: Optional[Callable] = None, **options: Any) -> Any:
        """AWS runs the kernel on a NeuronCore; here it runs in the simulator (artifacts are not produced)."""
        def wrap(f: Callable) -> Kernel:
            return Kernel(f, dialect=dialect, mode="baremetal", **options)
        return wrap if kernel is None else wrap(kernel)
    return baremetal


class LatencyStats:
    """``benchmark_result.nc_latency``: the cost model's estimate, in microseconds."""

    def __init__(self, result: LaunchResult) -> None:
        self.result = result

    def get_latency_percentile(self, percentile: int) -> float:
        # The model is deterministic: every percentile is the estimate.
        return self.result.estimated_latency_us

    def __repr__(self) -> str:
        return f"nc_latency(p50={self.get_latency_percentile(50):.2f} us, projected by the cost model)"


class BenchmarkResult:
    def __init__(self, result: LaunchResult, wall_times: list, trace_path: Optional[str] = None) -> None:
        self.nc_latency = LatencyStats(result)
        self.launch = result
        self.simulator_wall_times_s = wall_times
        # Where the instruction-level trace went (nki.benchmark(save_trace_name=...)); None when not asked.
        self.trace_path = trace_path

    @property
    def schedule(self) -> Any:
        """The launch's schedule (nki/schedule.py): per-instruction records when a trace was asked for."""
        return self.launch.schedule

    def summary(self) -> str:
        c = self.launch.costs
        busy = ", ".join(f"{k} {v * 1e6:.1f} us" for k, v in c.busy_s.items() if v)
        return (f"{self.launch.kernel_name}: projected {self.launch.estimated_latency_us:.1f} us on "
                f"{c.target.name} (cost model, docs/cost_model.md: busiest engine {c.busiest_engine}; serial "
                f"{c.serial_latency_s * 1e6:.1f} us; a launch from eager PyTorch adds "
                f"{c.hw.launch_s * 1e6:.0f} us), {c.total_instructions} instructions [{busy}]; "
                f"measured: simulator wall time {min(self.simulator_wall_times_s) * 1e3:.2f} ms on this host")


class BenchmarkKernel(Kernel):
    """``nki.benchmark(kernel)``: runs in the simulator and estimates the device latency. With
    ``save_trace_name=PATH`` (our keyword) it also writes the launch's instruction-level trace there: Chrome
    trace JSON (nki/trace.py), a lane per engine and DMA queue, projected by the schedule model; Perfetto and
    ``torchneuron-ext report --html`` open it."""

    def __init__(self, func: Callable, dialect: str, warmup: int, iters: int, save_trace_name: Optional[str] = None,
                 **options: Any) -> None:
        super().__init__(func, dialect=dialect, mode="benchmark", **options)
        self.warmup, self.iters = warmup, iters
        self.save_trace_name = os.fspath(save_trace_name) if save_trace_name is not None else None
        self.benchmark_result: Optional[BenchmarkResult] = None

    def wants_instructions(self) -> bool:
        """Whether the launch keeps its per-instruction records (they cost memory and time)."""
        return self.save_trace_name is not None

    def __getitem__(self, grid: Any) -> "GridKernel":
        bound = super().__getitem__(grid)
        owner = self

        class _Bound(GridKernel):
            def __call__(self, *args: Any, **kwargs: Any) -> Any:
                return owner._run(bound, args, kwargs)
        return _Bound(self, bound.grid)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._run(GridKernel(self, ()), args, kwargs)

    def _run(self, bound: GridKernel, args: tuple, kwargs: dict) -> Any:
        # The simulator is deterministic, so one run (not warmup + iters) gives the estimate; a few
        # extra runs measure the simulator's own wall time.
        walls = []
        out = None
        for run in range(max(1, min(self.iters, int(os.environ.get("NKI_BENCHMARK_SIM_RUNS", "1"))))):
            # Only the first run keeps its records: the simulator is deterministic and records slow it down.
            if run == 0 and self.wants_instructions():
                with _schedule.recording():
                    out = GridKernel.__call__(bound, *args, **kwargs)
                first = self.last_result
            else:
                out = GridKernel.__call__(bound, *args, **kwargs)
            walls.append(self.last_result.wall_time_s)
        result = first if self.wants_instructions() else self.last_result
        self.benchmark_result = BenchmarkResult(result, walls)
        if self.save_trace_name is not None and type(self) is BenchmarkKernel:
            self.benchmark_result.trace_path = _trace.write_kernel_trace(
                self.save_trace_name, result.schedule, self.__name__, {"grid": list(result.grid)})
        return out


def make_benchmark(dialect: str) -> Callable:
    def benchmark(kernel: Optional[Callable] = None, warmup: int = 10, iters: int = 100,
                  save_trace_name: Optional[str] = None, **options: Any) -> Any:
        """Runs the kernel and estimates its latency (``benchmark_result``); ``save_trace_name``: also write its
        instruction-level trace (Chrome trace JSON) to that path (see BenchmarkKernel)."""
        def wrap(f: Callable) -> BenchmarkKernel:
            f = f.func if isinstance(f, Kernel) else f
            return BenchmarkKernel(f, dialect, warmup, iters, save_trace_name, **options)
        return wrap if kernel is None else wrap(kernel)
    return benchmark


ARTIFACT_FORMAT = "torchneuron_ext-nki-simulator/1"


class ProfileKernel(BenchmarkKernel):
    """``nki.profile``: runs the kernel and writes the artifacts AWS's profile API writes, under the names it
    uses, in the simulator's own JSON (there is no compiled NEFF and no device trace to record; each file
    says so in its "format" and "note" fields): ``save_neff_name`` (what was launched), one trace per
    profiled execution (``<trace>.ntff`` for execution 1, ``<trace>_exec_<n>.ntff`` for the others: every
    ``profile_nth`` of ``num_execs``), and ``json_reports/`` with one report per profiled execution. The
    simulator is deterministic, so every profiled execution has the same cost-model breakdown.

    Each ``.ntff`` here is not Neuron Explorer's NTFF: it is a Chrome trace (JSON; nki/trace.py) of the
    schedule model's projection, a lane per engine and DMA queue and an event per instruction with its kernel
    line, operands and dependency arrows, which Perfetto (ui.perfetto.dev), chrome://tracing and
    ``torchneuron-ext report PATH --html`` open. Its top level also carries the cost-model summary of the
    json report."""

    def wants_instructions(self) -> bool:
        return bool(self.working_directory)

    def __init__(self, func: Callable, dialect: str, working_directory: Optional[str], neff_name: Optional[str],
                 trace_name: Optional[str], overwrite: bool, num_execs: int, profile_nth: int,
                 **options: Any) -> None:
        super().__init__(func, dialect, 0, 1, **options)
        if num_execs < 1 or profile_nth < 1:
            raise ValueError(f"nki.profile: num_execs and profile_nth must be positive, got {num_execs} and "
                             f"{profile_nth}")
        self.working_directory, self.trace_name, self.neff_name = working_directory, trace_name, neff_name
        self.overwrite, self.num_execs, self.profile_nth = overwrite, num_execs, profile_nth

    def profiled_executions(self) -> list:
        if self.num_execs < self.profile_nth:
            return [self.profile_nth]
        return list(range(self.profile_nth, self.num_execs + 1, self.profile_nth))

    def artifact_paths(self) -> dict:
        d = self.working_directory
        base = os.path.splitext(os.path.basename(self.trace_name or f"{self.__name__}.ntff"))[0]
        traces = {n: os.path.join(d, f"{base}.ntff" if n == 1 else f"{base}_exec_{n}.ntff")
                  for n in self.profiled_executions()}
        reports = {n: os.path.join(d, "json_reports", f"{base}_exec_{n}.json") for n in traces}
        return {"neff": os.path.join(d, os.path.basename(self.neff_name or "file.neff")), "traces": traces,
                "reports": reports}

    def _run(self, bound: GridKernel, args: tuple, kwargs: dict) -> Any:
        out = super()._run(bound, args, kwargs)
        if self.working_directory:
            self._write_artifacts()
        return out

    def _write_artifacts(self) -> None:
        paths = self.artifact_paths()
        if not self.overwrite and os.path.exists(paths["neff"]):
            # overwrite=False keeps what a previous run wrote (the kernel still ran and returned its results).
            import warnings
            warnings.warn(f"nki.profile: {paths['neff']} exists and overwrite=False, so the artifacts in "
                          f"{self.working_directory} were kept; pass overwrite=True to replace them", stacklevel=4)
            return
        os.makedirs(os.path.join(self.working_directory, "json_reports"), exist_ok=True)
        c, r = self.last_result.costs, self.last_result
        summary = {"format": ARTIFACT_FORMAT, "kernel": self.__name__, "target": c.target.name, "grid": list(r.grid),
                   "estimated_latency_us": r.estimated_latency_us,
                   "engine_busy_us": {k: v * 1e6 for k, v in c.busy_s.items()},
                   "instructions": dict(c.instructions), "bytes_read": c.bytes_read,
                   "bytes_written": c.bytes_written, "flops": c.flops, "simulator_wall_time_s": r.wall_time_s}
        _write_json(paths["neff"], {"format": ARTIFACT_FORMAT, "kernel": self.__name__, "target": c.target.name,
                                    "note": "the simulator interprets the kernel: no NEFF was compiled"})
        note = ("Chrome trace JSON (open in ui.perfetto.dev or with torchneuron-ext report --html), not an NTFF: "
                "instruction times projected on the target by the schedule model; no device trace was recorded")
        for n, path in paths["traces"].items():
            _trace.write_kernel_trace(path, r.schedule, self.__name__, dict(summary, execution=n, note=note))
            _write_json(paths["reports"][n], dict(summary, execution=n))


def _write_json(path: str, value: dict) -> None:
    with open(path, "w") as f:
        json.dump(value, f, indent=2)


def make_profile(dialect: str) -> Callable:
    def profile(kernel: Optional[Callable] = None, working_directory: Optional[str] = None,
                save_neff_name: Optional[str] = None, save_trace_name: Optional[str] = None,
                overwrite: bool = False, num_execs: int = 1, profile_nth: int = 1, **options: Any) -> Any:
        """Runs the kernel and writes its profile artifacts into working_directory (see ProfileKernel)."""
        def wrap(f: Callable) -> ProfileKernel:
            f = f.func if isinstance(f, Kernel) else f
            return ProfileKernel(f, dialect, working_directory, save_neff_name, save_trace_name, overwrite,
                                 num_execs, profile_nth, **options)
        return wrap if kernel is None else wrap(kernel)
    return profile


def make_trace(dialect: str) -> Callable:
    jit = make_jit(dialect)

    def trace(func: Optional[Callable] = None, **options: Any) -> Any:
        """``nki.trace``: ``nki.jit(mode="trace")``, a kernel traced into whatever calls it."""
        return jit(func, mode="trace", **options)
    return trace


def for_dialect(dialect: str) -> tuple:
    """``jit, simulate, simulate_kernel, baremetal, benchmark, profile`` of one dialect."""
    return (make_jit(dialect), make_simulate(dialect), make_simulate_kernel(dialect), make_baremetal(dialect),
            make_benchmark(dialect), make_profile(dialect))
