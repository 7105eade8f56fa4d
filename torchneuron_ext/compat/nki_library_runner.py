"""``torchneuron-ext nki-library CHECKOUT [-- PYTEST ARGS]``: AWS's NKI Library suite against the simulator.

Runs the checkout's integration tests (``test/integration``) in a fresh interpreter, in simulation mode
(``--test-mode simulation -m fast --continue-on-collection-errors``; the extra pytest arguments come later,
so they can say otherwise),
with the plugin compat/nki_library.py, the checkout and its ``src`` on PYTHONPATH, and
TORCHNEURON_EXT_NKI_COMPAT=1. Outcomes come from pytest's JUnit XML (not from its console output); the
report gives passed/failed/errors/skipped per folder (``core/attention``, ``experimental/conv``...), the
total time, the slowest tests and the skips counted per folder and reason (the reason the harness gave, so
each can be traced to the condition in AWS's harness that produced it). The exit status is pytest's.

Each test over a time budget (``--budget``, default 30 s) is put with what bounds it: AWS's harness alone
(the test's time outside the simulator's launches) over the budget; else the test's CPU time spread over
every CPU the process may use still over it (no scheduling of the same work brings it under); else the
simulator's launches, the only part a faster simulator changes.

Before the run, every Python file of the selection and of the library's ``src`` is parsed with this
interpreter: a file that does not parse makes every test importing it a collection error, so the report
names each such file, its line and error, and says whether this Python meets the checkout's
``requires-python`` (then the file itself is at fault, not the Python version). Likewise every import of the
library's own packages (those under ``src``) is resolved against the checkout: a module the tree lacks (a
test importing a kernel from a folder it was moved out of) is named with the importing file and line, and
with where a file of that name is, if anywhere. And the third-party packages the harness and the selected
tests import that this environment lacks are named, with one ``pip install`` line (compat/nki_library_packages.py):
when a conftest needs one, the runner stops there (exit status 2) rather than start pytest.
"""
from __future__ import annotations

import argparse
import ast
import dataclasses
import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from typing import Optional, Sequence

from .nki_library_packages import (format_missing_packages, from_module, import_time_imports, missing_packages,
                                   package_of, pip_names, python_files)

__all__ = ["Outcome", "FolderCounts", "SourceProblem", "build_command", "folder_of", "read_junit",
           "count_by_folder", "skips_by_reason", "over_budget", "format_budget", "format_report", "source_problems",
           "requires_python", "format_source_problems", "MissingModule", "missing_modules", "format_missing_modules",
           "run", "main"]

PLUGIN = "torchneuron_ext.compat.nki_library"
# The JUnit properties the plugin (compat/nki_library.py) writes per test and the report reads back.
SIMULATOR_WALL, SIMULATOR_CPU, TEST_CPU = "nki_simulator_wall_s", "nki_simulator_cpu_s", "test_cpu_s"
LAUNCHES = "nki_launches"
INTEGRATION = os.path.join("test", "integration")
# A module that fails to import is one error in its folder's count, not the end of the whole run.
DEFAULT_ARGS = ("--test-mode", "simulation", "-m", "fast", "--continue-on-collection-errors")
OUTCOMES = ("passed", "failed", "error", "skipped")


@dataclasses.dataclass(frozen=True)
class Outcome:
    """One test case of the JUnit report."""

    nodeid: str
    file: str       # relative to the checkout
    outcome: str    # one of OUTCOMES
    seconds: float
    reason: str = ""  # a skipped test's reason, as the harness gave it
    # Recorded by the plugin (None when the report has no such property, e.g. a collection error):
    simulator_seconds: Optional[float] = None      # wall time in the simulator's launches
    simulator_cpu_seconds: Optional[float] = None  # process CPU time during them
    cpu_seconds: Optional[float] = None            # process CPU time of the whole test

    @property
    def harness_seconds(self) -> Optional[float]:
        """The test's wall time outside the simulator: AWS's inputs, goldens, comparison, files."""
        return None if self.simulator_seconds is None else max(self.seconds - self.simulator_seconds, 0.0)


@dataclasses.dataclass
class FolderCounts:
    passed: int = 0
    failed: int = 0
    error: int = 0
    skipped: int = 0
    seconds: float = 0.0

    @property
    def total(self) -> int:
        return self.passed + self.failed + self.error + self.skipped

    def add(self, outcome: Outcome) -> None:
        setattr(self, outcome.outcome, getattr(self, outcome.outcome) + 1)
        self.seconds += outcome.seconds


def folder_of(path: str, depth: int = 2) -> str:
    """The report folder of a test file: its directory under test/integration, without the library's
    package folder (nkilib), cut to ``depth`` levels: test/integration/nkilib/core/moe/moe_cte/x.py gives
    core/moe."""
    parts = path.replace(os.sep, "/").split("/")
    for i in range(len(parts) - 1):
        if parts[i:i + 2] == ["test", "integration"]:
            parts = parts[i + 2:]
            break
    parts = parts[:-1] if parts and parts[-1].endswith(".py") else parts
    if len(parts) > 1 and parts[0] == "nkilib":
        parts = parts[1:]
    return "/".join(parts[:depth]) or "."


def _file_of(case: ET.Element, checkout: str) -> str:
    # xunit1 reports carry the file; a collection error names only the module (classname) in dotted form.
    # Both are relative to pytest's rootdir, which is the checkout's test/ when its pytest.ini is there.
    if case.get("file"):
        file = case.get("file", "")
        for candidate in (file, os.path.join("test", file)):
            if os.path.isfile(os.path.join(checkout, candidate)):
                return candidate
        return file
    dotted = case.get("classname", "").split(".")
    for end in range(len(dotted), 0, -1):
        for candidate in (os.path.join(*dotted[:end]) + ".py", os.path.join("test", *dotted[:end]) + ".py"):
            if os.path.isfile(os.path.join(checkout, candidate)):
                return candidate
    return os.path.join(*dotted) if dotted else ""


def _nodeid(case: ET.Element, file: str) -> str:
    classname = case.get("classname", "")
    if not classname:
        return file  # a module that failed to collect
    # classname is the module's dotted path, then the test class if there is one
    parts = classname.split(".")
    stem = os.path.splitext(os.path.basename(file))[0]
    classes = parts[parts.index(stem) + 1:] if stem in parts else []
    return "::".join([file, *classes, case.get("name", "")])


def read_junit(path: str, checkout: str) -> list:
    """The test cases of a pytest JUnit XML report, each counted once: failed, else error, else skipped,
    else passed (a test that fails and then errors in teardown is one failure)."""
    outcomes = []
    for case in ET.parse(path).getroot().iter("testcase"):
        kinds = {child.tag for child in case}
        outcome = ("failed" if "failure" in kinds else "error" if "error" in kinds
                   else "skipped" if "skipped" in kinds else "passed")
        file = _file_of(case, checkout)
        skipped = case.find("skipped")
        reason = skipped.get("message", "") if outcome == "skipped" and skipped is not None else ""
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        outcomes.append(Outcome(_nodeid(case, file), file, outcome, float(case.get("time", 0) or 0), reason,
                                *(_seconds(props.get(name)) for name in (SIMULATOR_WALL, SIMULATOR_CPU, TEST_CPU))))
    return outcomes


def _seconds(value: Optional[str]) -> Optional[float]:
    try:
        return None if value is None else float(value)
    except ValueError:
        return None


def count_by_folder(outcomes: Sequence[Outcome], depth: int = 2) -> dict:
    counts: dict = {}
    for o in outcomes:
        counts.setdefault(folder_of(o.file, depth), FolderCounts()).add(o)
    return dict(sorted(counts.items()))


def skips_by_reason(outcomes: Sequence[Outcome], depth: int = 2) -> dict:
    """{(folder, reason): how many tests skipped for it}, by folder then by count (most first)."""
    counts: dict = {}
    for o in outcomes:
        if o.outcome == "skipped":
            key = (folder_of(o.file, depth), o.reason)
            counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (kv[0][0], -kv[1], kv[0][1])))


# What bounds a test over the budget (over_budget's keys, in the report's order, with how it says them).
BOUNDS = (("harness", "AWS's harness alone took longer (the test's time outside the simulator's launches)"),
          ("cpu", "the test's CPU time over the {cpus} CPU(s) this process may use is longer (even with every "
                  "CPU busy throughout)"),
          ("simulator", "the simulator's launches make the difference"),
          ("unsplit", "no split recorded (the plugin was not loaded, or the test never started)"))
DEFAULT_BUDGET_S = 30.0  # issue 29's goal for each test of the library's fast selection


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity, else the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def over_budget(outcomes: Sequence[Outcome], budget: float, cpus: int) -> dict:
    """The tests whose wall time is over ``budget`` seconds, slowest first, by what bounds them (BOUNDS' keys):
    ``harness`` when the time outside the simulator's launches alone is over it, else ``cpu`` when the test's
    CPU time over ``cpus`` CPUs is (a floor on its wall time however the work were spread), else
    ``simulator``; ``unsplit`` when the plugin recorded no split."""
    groups: dict = {key: [] for key, _ in BOUNDS}
    for o in sorted(outcomes, key=lambda o: o.seconds, reverse=True):
        if o.seconds <= budget:
            break
        if o.simulator_seconds is None:
            key = "unsplit"
        elif o.harness_seconds > budget:
            key = "harness"
        elif o.cpu_seconds is not None and o.cpu_seconds / cpus > budget:
            key = "cpu"
        else:
            key = "simulator"
        groups[key].append(o)
    return groups


def format_budget(outcomes: Sequence[Outcome], budget: float, cpus: int) -> list:
    """The report's lines on the tests over ``budget`` seconds (over_budget), each listed under its bound."""
    groups = over_budget(outcomes, budget, cpus)
    over = sum(len(g) for g in groups.values())
    if not over:
        return [f"no test took over the {budget:g} s budget"]
    lines = [f"over the {budget:g} s budget: {over} of {len(outcomes)} tests"]
    for key, text in BOUNDS:
        if groups[key]:
            lines.append(f"  {len(groups[key]):5}  {text.format(cpus=cpus)}:")
            lines += [f"         {o.seconds:8.2f} s  {_split(o)}  {o.nodeid}" for o in groups[key]]
    return lines


def format_report(outcomes: Sequence[Outcome], wall_seconds: float, *, depth: int = 2, slowest: int = 10,
                  markdown: bool = False, budget: Optional[float] = None, cpus: Optional[int] = None) -> str:
    """The report: counts per folder, the wall time, the ``slowest`` tests, with ``budget`` (seconds) the tests
    over it by what bounds them (``cpus``: the CPUs the tests could use, default this process's), and the
    skips by folder and reason."""
    counts = count_by_folder(outcomes, depth)
    total = FolderCounts()
    for o in outcomes:
        total.add(o)
    head = ("folder", "passed", "failed", "errors", "skipped", "total", "seconds")
    rows = [(f, c.passed, c.failed, c.error, c.skipped, c.total, f"{c.seconds:.1f}") for f, c in counts.items()]
    rows.append(("total", total.passed, total.failed, total.error, total.skipped, total.total,
                 f"{total.seconds:.1f}"))
    lines = []
    if markdown:
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "|".join("---" for _ in head) + "|")
        lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in rows]
    else:
        widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
        fmt = lambda row: "  ".join(str(v).ljust(w) if i == 0 else str(v).rjust(w)  # noqa: E731
                                    for i, (v, w) in enumerate(zip(row, widths)))
        lines += [fmt(head)] + [fmt(r) for r in rows]
    lines.append(f"wall time {wall_seconds:.1f} s (pytest in a fresh interpreter, collection included)")
    ranked = sorted(outcomes, key=lambda o: o.seconds, reverse=True)[:slowest]
    if ranked:
        lines.append(f"slowest {len(ranked)} (wall; then the simulator's launches, wall / CPU, and the rest, "
                     f"AWS's harness, wall; the whole test's CPU):")
        lines += [f"  {o.seconds:8.2f} s  {_split(o)}  {o.outcome:7}  {o.nodeid}" for o in ranked]
    if budget:
        lines += format_budget(outcomes, budget, cpus or usable_cpus())
    skips = skips_by_reason(outcomes, depth)
    if skips and markdown:
        lines += ["", "| folder | skip reason | skipped |", "|---|---|---|"]
        lines += [f"| {folder} | {reason.replace('|', '/') or '(none given)'} | {n} |"
                  for (folder, reason), n in skips.items()]
    elif skips:
        lines.append("skipped, by folder and reason:")
        lines += [f"  {n:5}  {folder}  {reason or '(none given)'}" for (folder, reason), n in skips.items()]
    return "\n".join(lines) + "\n"


def _split(o: Outcome) -> str:
    if o.simulator_seconds is None:
        return f"{'(no split recorded)':57}"
    sim_cpu = "-" if o.simulator_cpu_seconds is None else f"{o.simulator_cpu_seconds:.1f}"
    cpu = "-" if o.cpu_seconds is None else f"{o.cpu_seconds:.1f}"
    return (f"simulator {o.simulator_seconds:6.1f} / {sim_cpu:>5} s  harness {o.harness_seconds:6.1f} s  "
            f"cpu {cpu:>6} s")


@dataclasses.dataclass(frozen=True)
class SourceProblem:
    """A Python file of the checkout this interpreter cannot parse."""

    file: str       # relative to the checkout
    line: int
    error: str      # e.g. "IndentationError: unexpected indent"


def source_problems(checkout: str, select: Sequence[str] = (), scanned: Optional[list] = None) -> list:
    """The files under the selected paths (default test/integration) and the library's src that do not parse
    with this interpreter's grammar. ``scanned``: scan_sources' result, when the caller has it."""
    return [problem for _, problem, _, _ in (scan_sources(checkout, select) if scanned is None else scanned)
            if problem is not None]


def scan_sources(checkout: str, select: Sequence[str] = ()) -> list:
    """Each selected file and each file of the library's src parsed once, for source_problems, missing_modules
    and missing_packages: (path, SourceProblem or None, its imports as _imported_modules gives them, its
    import-time imports as import_time_imports gives them; [] where it does not parse). The checks parsed every
    file in turn (one test's selection of AWS's 2026-04-13 tree, 175 files: 1.5-1.7 s CPU here, 1.0 s parsed
    once); only the imports are kept, not the trees."""
    scanned = []
    for path in python_files(checkout, [*(select or [INTEGRATION]), "src"]):
        try:
            with open(path, "rb") as f:
                tree = ast.parse(f.read(), path)
        except SyntaxError as e:
            scanned.append((path, SourceProblem(os.path.relpath(path, checkout), e.lineno or 0,
                                                f"{type(e).__name__}: {e.msg}"), [], []))
            continue
        except (OSError, ValueError) as e:  # unreadable, or NUL bytes in the source
            scanned.append((path, SourceProblem(os.path.relpath(path, checkout), 0, f"{type(e).__name__}: {e}"), [],
                            []))
            continue
        package = package_of(checkout, path)
        scanned.append((path, None, _imported_modules(tree, package), import_time_imports(tree, package)))
    return scanned


@dataclasses.dataclass(frozen=True)
class MissingModule:
    """An import of one of the library's packages naming a module the checkout does not have."""

    file: str                 # the importing file, relative to the checkout
    line: int
    module: str               # dotted, e.g. "nkilib_src.nkilib.experimental.subkernels.topk_reduce"
    elsewhere: tuple = ()     # files of the checkout's src with the module's last name


def _imported_modules(tree: ast.AST, package: Sequence[str]) -> list:
    """(line, dotted module) of each import in ``tree``; relative ones resolved against ``package``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and (module := from_module(node, package)):
            found.append((node.lineno, module))
    return found


def missing_modules(checkout: str, select: Sequence[str] = (), scanned: Optional[list] = None) -> list:
    """Imports, in the selected tests and the library's src, of modules of the library's own packages (the
    folders directly under ``src``) that no file or folder of the checkout provides. Other packages (torch,
    nki, the test harness the plugin may supply) are not judged here. ``scanned``: scan_sources' result,
    when the caller has it."""
    src = os.path.join(os.path.abspath(checkout), "src")
    own = {n for n in os.listdir(src) if os.path.isdir(os.path.join(src, n))} if os.path.isdir(src) else set()
    by_name: dict = {}
    for dirpath, _, names in os.walk(src):
        for n in names:
            if n.endswith(".py"):
                by_name.setdefault(n[:-3], []).append(os.path.relpath(os.path.join(dirpath, n), checkout))
    missing = []
    for path, _, imports, _ in (scan_sources(checkout, select) if scanned is None else scanned):
        for line, module in imports:  # a file that does not parse has none: source_problems names it
            parts = module.split(".")
            if parts[0] not in own:
                continue
            base = os.path.join(src, *parts)
            if os.path.isdir(base) or os.path.isfile(base + ".py"):
                continue
            missing.append(MissingModule(os.path.relpath(path, checkout), line, module,
                                         tuple(sorted(by_name.get(parts[-1], ())))))
    return missing


def format_missing_modules(missing: Sequence[MissingModule]) -> str:
    if not missing:
        return ""
    lines = [f"AWS's tree lacks {len({m.module for m in missing})} module(s) its files import; tests importing "
             f"them are collection errors:"]
    for m in missing:
        hint = f" (a file of that name is at {', '.join(m.elsewhere)})" if m.elsewhere else ""
        lines.append(f"  {m.file}:{m.line}: {m.module}{hint}")
    return "\n".join(lines) + "\n"


def requires_python(checkout: str) -> Optional[str]:
    """The ``requires-python`` of the checkout's pyproject.toml (e.g. ">=3.10"), if it states one."""
    try:
        with open(os.path.join(checkout, "pyproject.toml"), encoding="utf-8") as f:
            m = re.search(r"""^\s*requires-python\s*=\s*["']([^"']+)["']""", f.read(), re.M)
    except OSError:
        return None
    return m.group(1).strip() if m else None


def _meets(spec: str, version: tuple) -> Optional[bool]:
    """Whether ``version`` satisfies a requirement made of >=, >, <=, <, ==, != clauses on X.Y[.Z]; None
    when a clause has another form (then the report says it could not tell)."""
    ops = {">=": tuple.__ge__, ">": tuple.__gt__, "<=": tuple.__le__, "<": tuple.__lt__,
           "==": tuple.__eq__, "!=": tuple.__ne__}
    for clause in filter(None, (c.strip() for c in spec.split(","))):
        m = re.fullmatch(r"(>=|<=|==|!=|>|<)\s*(\d+(?:\.\d+){0,2})", clause)
        if m is None:
            return None
        want = tuple(int(x) for x in m.group(2).split("."))
        if not ops[m.group(1)](version[:len(want)], want):
            return False
    return True


def format_source_problems(problems: Sequence[SourceProblem], spec: Optional[str],
                           version: tuple = tuple(sys.version_info[:3])) -> str:
    if not problems:
        return ""
    py = ".".join(map(str, version))
    meets = _meets(spec, version) if spec else None
    why = (f"Python {py} meets the checkout's requires-python {spec!r}, so these files are at fault, not the "
           f"Python version" if meets else
           f"Python {py} does not meet the checkout's requires-python {spec!r}: run with a Python that does"
           if meets is False else
           f"the checkout states no requires-python this runner can read{f' ({spec!r})' if spec else ''}")
    lines = [f"{len(problems)} source file(s) do not parse with Python {py} ({why}); tests importing them are "
             f"collection errors:"]
    lines += [f"  {p.file}:{p.line}: {p.error}" for p in problems]
    return "\n".join(lines) + "\n"


def _package_root() -> str:
    import torchneuron_ext
    return os.path.dirname(os.path.dirname(os.path.abspath(torchneuron_ext.__file__)))


def build_command(checkout: str, junit_xml: str, select: Sequence[str] = (), extra: Sequence[str] = ()) -> tuple:
    """(argv, environment) of the pytest run; the checkout is its working directory."""
    argv = [sys.executable, "-m", "pytest", *(select or [INTEGRATION]), "-p", PLUGIN, "-p", "no:cacheprovider",
            *DEFAULT_ARGS, f"--junit-xml={junit_xml}", "-o", "junit_family=xunit1", "-q", *extra]
    env = dict(os.environ)
    paths = [os.path.abspath(checkout), os.path.join(os.path.abspath(checkout), "src"), _package_root()]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["TORCHNEURON_EXT_NKI_COMPAT"] = "1"
    return argv, env


def run(checkout: str, select: Sequence[str] = (), extra: Sequence[str] = (), *, junit_xml: Optional[str] = None,
        depth: int = 2, slowest: int = 10, markdown: bool = False, budget: Optional[float] = DEFAULT_BUDGET_S,
        out=None) -> int:
    """Run the suite and print the report to ``out`` (stdout); pytest's exit status."""
    out = out or sys.stdout
    if not os.path.isdir(os.path.join(checkout, INTEGRATION)):
        print(f"torchneuron-ext nki-library: {checkout} is not a checkout of AWS's NKI Library (it has no "
              f"{INTEGRATION} folder)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="nki-library-") as tmp:
        report = junit_xml or os.path.join(tmp, "junit.xml")
        scanned = scan_sources(checkout, select)
        problems = format_source_problems(source_problems(checkout, select, scanned), requires_python(checkout))
        problems += format_missing_modules(missing_modules(checkout, select, scanned))
        packages = missing_packages(checkout, select or [INTEGRATION], {p: timed for p, _, _, timed in scanned})
        del scanned
        if any(p.in_conftest for p in packages):  # pytest would stop at the conftest and write no report
            print(f"torchneuron-ext nki-library: {format_missing_packages(packages, pip_names(checkout))}", end="",
                  file=sys.stderr)
            return 2
        problems += format_missing_packages(packages, pip_names(checkout))
        argv, env = build_command(checkout, os.path.abspath(report), select, extra)
        start = time.perf_counter()
        status = subprocess.call(argv, cwd=checkout, env=env)
        wall = time.perf_counter() - start
        if not os.path.isfile(report):
            print(f"torchneuron-ext nki-library: pytest exited with status {status} and wrote no report "
                  f"(see its output above)", file=sys.stderr)
            return status or 1
        outcomes = read_junit(report, checkout)
    print(format_report(outcomes, wall, depth=depth, slowest=slowest, markdown=markdown, budget=budget), end="",
          file=out)
    print(problems, end="", file=out)
    return status


def _budget_seconds(text: str) -> float:
    """``--budget``'s value: seconds, 0 or more."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds (0 or more; 0 leaves the list out)")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("checkout", help="a checkout of AWS's NKI Library (has test/integration and src)")
    parser.add_argument("--select", action="append", default=[], metavar="PATH",
                        help="test files or folders to run, relative to the checkout (default test/integration)")
    parser.add_argument("--junit-xml", metavar="FILE", help="keep pytest's JUnit XML report here")
    parser.add_argument("--depth", type=int, default=2, help="folder levels under test/integration/nkilib to "
                        "count by (default 2: core/attention)")
    parser.add_argument("--slowest", type=int, default=10, help="how many of the slowest tests to list")
    parser.add_argument("--markdown", action="store_true", help="print the counts as a Markdown table")
    parser.add_argument("--budget", type=_budget_seconds, default=DEFAULT_BUDGET_S, metavar="SECONDS",
                        help="list the tests over this wall time by what bounds them: AWS's harness, the test's "
                        "CPU time over this host's CPUs, or the simulator (default %(default)g; 0: no list)")
    parser.epilog = ("Arguments after -- go to pytest, after the defaults --test-mode simulation -m fast, so "
                     "they override them (e.g. -- -m 'fast or not fast' -k rmsnorm; -- --single-launch-collectives "
                     "runs multi-rank collective tests as AWS's public harness does, in one launch).")


def split_pytest_args(argv: Sequence[str]) -> tuple:
    """(the command's own arguments, pytest's: everything after the first --)."""
    argv = list(argv)
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1:]
    return argv, []


def run_from_arguments(args: argparse.Namespace, pytest_args: Sequence[str] = ()) -> int:
    return run(args.checkout, args.select, pytest_args, junit_xml=args.junit_xml, depth=args.depth,
               slowest=args.slowest, markdown=args.markdown, budget=args.budget)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torchneuron_ext.compat.nki_library",
                                     description="Run AWS's NKI Library test suite against the NKI simulator.")
    add_arguments(parser)
    own, pytest_args = split_pytest_args(sys.argv[1:] if argv is None else argv)
    return run_from_arguments(parser.parse_args(own), pytest_args)
