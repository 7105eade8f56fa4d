"""`torchneuron-ext`: the command line of the emulated neuron device.

    torchneuron-ext info                          the cores, their memory and versions
    torchneuron-ext demo [--out DIR]              profile three RMSNorm variants and report
    torchneuron-ext profile [--out DIR] -- python script.py ARGS
    torchneuron-ext project [--target T] [--world-size N] [--out DIR] -- python script.py ARGS
                                                  dry run: the script on fake tensors, projected on T
    torchneuron-ext report PATH... [--html OUT]   summarise traces (files or directories); OUT.html: the viewer
    torchneuron-ext view PATH... [--port N]       serve the HTML report on localhost
    torchneuron-ext nki-library CHECKOUT [-- PYTEST ARGS]
                                                  AWS's NKI Library tests against the NKI simulator, per folder
"""
from __future__ import annotations

import argparse
import os
import platform
import runpy
import sys
from typing import Optional, Sequence


def _info(args: argparse.Namespace) -> int:
    import torch

    import torchneuron_ext
    from torchneuron_ext import _C
    from torchneuron_ext.neuron.device import local_devices

    n = torch.neuron.device_count()
    print(f"torchneuron_ext {torchneuron_ext.__version__} (emulated AWS Trainium neuron device)")
    print(f"torch {torch.__version__}, Python {platform.python_version()}, {platform.machine()}")
    error = _C._config_error()
    if error:
        print(f"configuration error: {error}")
        return 1
    print(f"NeuronCores: {n} (from {_C._config_source()})")
    for i in local_devices():
        p = torch.neuron.get_device_properties(i)
        free, total = torch.neuron.mem_get_info(i)
        print(
            f"  neuron:{i}  {p.core_type} of {p.name}, physical core {p.physical_core_id}, "
            f"HBM {_C._format_bytes(total)} ({_C._format_bytes(free)} free)"
        )
    print(f"autocast dtype: {str(torch.get_autocast_dtype('neuron')).replace('torch.', '')}")
    return 0


def _script_argv(args: argparse.Namespace) -> list:
    """The script and its arguments after `--`, without a leading `python` (both are optional)."""
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if command and os.path.basename(command[0]).startswith("python"):
        command = command[1:]
    return command


def _profile(args: argparse.Namespace) -> int:
    import torch
    from torch.profiler import ProfilerActivity

    from torchneuron_ext.profiler import NeuronConfig, NeuronProfiler, format_report, summarize_trace
    from torchneuron_ext.profiler.kineto_markers import profiling

    command = _script_argv(args)
    if not command:
        print("torchneuron-ext profile: give the script to run, e.g. `torchneuron-ext profile -- python train.py`",
              file=sys.stderr)
        return 2
    if command[0] == "-m":
        if len(command) < 2:
            print("torchneuron-ext profile: -m needs a module name", file=sys.stderr)
            return 2
        target, run = command[1], lambda: runpy.run_module(command[1], run_name="__main__", alter_sys=True)
        sys.argv = command[1:]
    else:
        target = command[0]
        if not os.path.isfile(target):
            print(f"torchneuron-ext profile: no such script: {target}", file=sys.stderr)
            return 2
        sys.argv = command
        sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
        run = lambda: runpy.run_path(target, run_name="__main__")  # noqa: E731
    cfg = NeuronConfig(profile_output_dir=args.out)
    exporter = NeuronProfiler(cfg)
    status = 0
    with profiling(torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
                                          experimental_config=cfg, on_trace_ready=exporter.export_trace,
                                          # with_stack too: the report's memory by category needs all three
                                          record_shapes=True, profile_memory=True, with_stack=True)):
        try:
            run()
        except SystemExit as e:
            status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    out = exporter.last_export_dir
    from torchneuron_ext.profiler.html import write_html_report
    from torchneuron_ext.profiler.trace_events import classify

    trace = classify(os.path.join(out, "trace.json"))  # once, for the summary and the viewer
    print(format_report(summarize_trace(trace)), file=sys.stderr)
    write_html_report([trace], os.path.join(out, "report.html"), title=f"neuron profile of {target}")
    print(f"trace and report written to {out} (open report.html in a browser)", file=sys.stderr)
    return status


def _project(args: argparse.Namespace) -> int:
    from torchneuron_ext.profiler.dry_run import DryRunError, dry_run_script

    command = _script_argv(args)
    if not command or (command[0] == "-m" and len(command) < 2):
        print("torchneuron-ext project: give the script to dry-run, e.g. "
              "`torchneuron-ext project --target trn2 -- python train.py`", file=sys.stderr)
        return 2
    if command[0] != "-m" and not os.path.isfile(command[0]):
        print(f"torchneuron-ext project: no such script: {command[0]}", file=sys.stderr)
        return 2
    try:
        result, status = dry_run_script(command, target=args.target, world_size=args.world_size)
    except DryRunError as e:
        print(f"torchneuron-ext project: {e}", file=sys.stderr)
        return 1
    except ValueError as e:  # an unknown target
        print(f"torchneuron-ext project: {e}", file=sys.stderr)
        return 2
    out = result.write(args.out, title=f"dry run of {command[-1] if command[0] == '-m' else command[0]}")
    print(result.report(), file=sys.stderr)
    print(f"dry run: {result.kernels} kernels in {result.seconds:.1f} s; trace and report written to {out} "
          "(open report.html in a browser)", file=sys.stderr)
    return status


def _report(args: argparse.Namespace) -> int:
    from torchneuron_ext.profiler import format_report, summarize_trace

    from torchneuron_ext.profiler.html.kernel_view import format_kernel_views, kernel_views
    from torchneuron_ext.profiler.trace_events import classify

    try:
        traces = [classify(path) for path in args.path]  # once each, for the summary and the viewer
        summaries = [summarize_trace(trace) for trace in traces]
        kernels = [kernel_views(trace) for trace in traces]  # NKI instruction profiles, if any
        if args.html:
            from torchneuron_ext.profiler.html import write_html_report

            write_html_report(traces, args.html, title=args.title)
    except (OSError, ValueError) as e:
        print(f"torchneuron-ext report: {e}", file=sys.stderr)
        return 2
    for path, summary, views in zip(args.path, summaries, kernels):
        if len(args.path) > 1:
            print(f"\n### {path}")
        print(format_report(summary, top=args.top), end="")
        print(format_kernel_views(views), end="")
    if args.html:
        print(f"\nHTML report written to {args.html} (self-contained: open it in any browser)")
    return 0


def _view(args: argparse.Namespace) -> int:
    from torchneuron_ext.profiler.html import serve, serve_html

    try:
        if len(args.path) == 1 and args.path[0].endswith(".html"):  # a report written before
            with open(args.path[0], encoding="utf-8") as f:
                serve_html(f.read(), host=args.host, port=args.port)
        else:
            serve(args.path, host=args.host, port=args.port, title=args.title)
    except (OSError, ValueError) as e:
        print(f"torchneuron-ext view: {e}", file=sys.stderr)
        return 2
    return 0


def _demo(args: argparse.Namespace) -> int:
    from torchneuron_ext.profiler.demo import run_demo

    return run_demo(args.out, size=args.size)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="torchneuron-ext", description="The emulated AWS Trainium neuron device.")
    sub = parser.add_subparsers(dest="command_name", required=True)
    sub.add_parser("info", help="print the emulated NeuronCores, their memory and versions").set_defaults(func=_info)
    p = sub.add_parser("demo", help="profile naive and fused RMSNorm on neuron and report where the time goes")
    p.add_argument("--out", default="neuron_profile/demo", help="directory for traces and reports")
    p.add_argument("--size", type=int, default=2048, help="rows and columns of the input (default 2048)")
    p.set_defaults(func=_demo)
    p = sub.add_parser("profile", help="run a Python script under the profiler; write its trace and report")
    p.add_argument("--out", default="neuron_profile", help="profile_output_dir (default ./neuron_profile)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- python script.py ARGS")
    p.set_defaults(func=_profile)
    p = sub.add_parser("project", help="dry-run a Python script on fake tensors (nothing allocated or computed) and "
                       "project it on a Trainium target: timeline, report, viewer, peak HBM per core")
    p.add_argument("--target", default=None, help="trn1, trn2, trn3, optionally :lnc=1|2 (default: the environment's)")
    p.add_argument("--world-size", type=int, default=1, help="ranks of the simulated world (fake process group)")
    p.add_argument("--out", default="neuron_profile/dry_run", help="directory for trace.json, summary.txt, report.html")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- python script.py ARGS")
    p.set_defaults(func=_project)
    p = sub.add_parser("report", help="summarise trace.json files (or the newest one under each directory)")
    p.add_argument("path", nargs="+", help="trace.json files or profile directories; several are compared")
    p.add_argument("--top", type=int, default=15, help="how many ops to list")
    p.add_argument("--html", metavar="OUT.html", help="also write the self-contained HTML report (timeline, "
                   "ops, HBM, side-by-side comparison)")
    p.add_argument("--title", default="neuron profile", help="title of the HTML report")
    p.set_defaults(func=_report)
    p = sub.add_parser("view", help="serve the HTML report of traces on localhost and print its address")
    p.add_argument("path", nargs="+", help="trace.json files or profile directories, or a report .html")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=0, help="port (default: any free one)")
    p.add_argument("--title", default="neuron profile", help="title of the report")
    p.set_defaults(func=_view)
    from torchneuron_ext.compat import nki_library_runner
    p = sub.add_parser("nki-library", help="run AWS's NKI Library test suite (a checkout) against the NKI "
                       "simulator and report the outcomes per folder")
    nki_library_runner.add_arguments(p)
    p.set_defaults(func=nki_library_runner.run_from_arguments)
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["nki-library"]:
        # Everything after -- is pytest's, wherever the command's own options are.
        own, pytest_args = nki_library_runner.split_pytest_args(argv)
        args = parser.parse_args(own)
        return int(args.func(args, pytest_args) or 0)
    args = parser.parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
