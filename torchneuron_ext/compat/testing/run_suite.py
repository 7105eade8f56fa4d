"""Run a checkout of TorchNeuron's test suite on the emulator, one folder at a time, and count.

    python -m torchneuron_ext.compat.testing.run_suite CHECKOUT [FOLDER ...] [--json FILE] [--timeout S]
        [--memory-limit GIB] [-- PYTEST_ARGS]

CHECKOUT holds TorchNeuron's ``conftest.py`` and ``tests/`` (extract only those: see docs/torch_neuronx.md);
FOLDERs are under ``tests/`` (default: the folders in ``DEFAULT_FOLDERS``). Each folder runs in its own
``python -m pytest -p torchneuron_ext.compat.testing.torchneuron_suite`` process (the emulator's core count is
fixed when its runtime starts); the table gives, per folder, the test files that import and the tests
passed / failed / skipped (out of scope, and skipped by the suite itself).
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

DEFAULT_FOLDERS = ("python_ops", "operations", "device", "streams", "views", "nki", "neuron_dynamo_backend/e2e",
                   "huggingface", "distributed")
COLUMNS = ("files", "imported", "passed", "failed", "error", "skipped_out_of_scope", "skipped", "xfailed", "xpassed")


def _own_process_files(checkout: str, folder: str) -> list[str]:
    """Test files that must run in a session of their own: the suite's conftest gives them every core
    (multi_device-marked or _all_cores files), which a session shared with single-core tests cannot."""
    if folder.split("/")[0] == "distributed":
        return []  # the whole folder is distributed: one session without the single-core mapping
    found = []
    for root, _, names in os.walk(os.path.join(checkout, "tests", folder)):
        for name in sorted(names):
            if name.startswith("test_") and name.endswith(".py"):
                path = os.path.join(root, name)
                with open(path, errors="replace") as f:
                    text = f.read()
                if "_all_cores" in name or "mark.multi_device" in text:
                    found.append(os.path.relpath(path, checkout))
    return sorted(found)


def _limit_memory(gib: float) -> Any:
    """A preexec_fn capping the test process's data segment (anonymous memory): a test that allocates too
    much fails with an allocation error instead of the machine's OOM killer ending the whole run."""
    def apply() -> None:
        import resource

        limit = int(gib * 2**30)
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))

    return apply if gib > 0 else None


def _pytest(checkout: str, paths: list[str], timeout: float, extra: list[str],
            memory_gib: float = 0) -> tuple[int, dict[str, Any], str]:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        report = f.name
    cmd = [sys.executable, "-m", "pytest", "-p", "torchneuron_ext.compat.testing.torchneuron_suite", *paths,
           "-q", "-p", "no:cacheprovider", "--continue-on-collection-errors", f"--tnx-timeout={timeout:g}",
           f"--tnx-report={report}", *extra]
    proc = subprocess.run(cmd, cwd=checkout, capture_output=True, text=True, preexec_fn=_limit_memory(memory_gib))
    try:
        with open(report) as f:
            per_file = json.load(f)
    except (OSError, json.JSONDecodeError):
        per_file = {}
    finally:
        if os.path.exists(report):
            os.remove(report)
    return proc.returncode, per_file, proc.stdout


def run_folder(checkout: str, folder: str, timeout: float, extra: list[str], memory_gib: float = 0) -> dict[str, Any]:
    start = time.monotonic()
    own = _own_process_files(checkout, folder)
    rc, per_file, out = _pytest(checkout, [f"tests/{folder}", *(f"--ignore={p}" for p in own)], timeout, extra,
                                memory_gib)
    outputs = [out]
    for path in own:
        rc_one, files, out = _pytest(checkout, [path], timeout, extra, memory_gib)
        rc = rc or rc_one
        per_file.update(files)
        outputs.append(out)
    totals: collections.Counter = collections.Counter()
    for counts in per_file.values():
        totals["files"] += 1
        totals["imported"] += 1 if counts.get("imported") else 0
        for key in COLUMNS[2:]:
            totals[key] += counts.get(key, 0)
    return {"folder": folder, "returncode": rc, "seconds": round(time.monotonic() - start, 1),
            "totals": {k: v for k, v in totals.items() if v}, "files": per_file,
            "output_tail": [line for out in outputs for line in out.splitlines()[-40:]]}


def table(results: list[dict[str, Any]]) -> str:
    header = f"{'folder':28s} {'files':>5s} {'import':>6s} {'pass':>5s} {'fail':>5s} {'error':>5s} " \
             f"{'oos':>5s} {'skip':>5s} {'secs':>6s}"
    lines = [header, "-" * len(header)]
    for r in results:
        t = r["totals"]
        passed = t.get("passed", 0) + t.get("xpassed", 0)
        skipped = t.get("skipped", 0) + t.get("xfailed", 0)
        lines.append(f"{r['folder']:28s} {t.get('files', 0):5d} {t.get('imported', 0):6d} {passed:5d} "
                     f"{t.get('failed', 0):5d} {t.get('error', 0):5d} {t.get('skipped_out_of_scope', 0):5d} "
                     f"{skipped:5d} {r['seconds']:6.0f}")
    lines.append("(import: files that import; pass includes xpass; oos: skipped as out of scope for the emulator; "
                 "skip: skipped or xfailed by the suite itself)")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    extra: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    parser = argparse.ArgumentParser(prog="python -m torchneuron_ext.compat.testing.run_suite", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkout", help="directory with TorchNeuron's conftest.py and tests/")
    parser.add_argument("folders", nargs="*", default=list(DEFAULT_FOLDERS), help="folders under tests/")
    parser.add_argument("--json", help="write the per-folder and per-file counts to this file")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per test (default 300)")
    parser.add_argument("--memory-limit", type=float, default=8.0,
                        help="GiB of anonymous memory per test process (default 8; 0: no limit)")
    args = parser.parse_args(argv)
    checkout = os.path.abspath(args.checkout)
    if not os.path.isdir(os.path.join(checkout, "tests")):
        parser.error(f"{checkout} has no tests/ folder: extract TorchNeuron's tests there (docs/torch_neuronx.md)")
    if os.path.isdir(os.path.join(checkout, "torch_neuronx")):
        print(f"note: {checkout}/torch_neuronx (TorchNeuron's sources) is ignored in the test process, but "
              f"processes the tests spawn would import it: extract only conftest.py and tests/", file=sys.stderr)
    results = []
    for folder in args.folders:
        print(f"running tests/{folder} ...", file=sys.stderr, flush=True)
        results.append(run_folder(checkout, folder.strip("/"), args.timeout, extra, args.memory_limit))
    print(table(results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0 if all(r["totals"].get("failed", 0) + r["totals"].get("error", 0) == 0 for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
