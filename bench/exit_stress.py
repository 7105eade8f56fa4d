"""Processes that end right after their work must exit cleanly: no "terminate called without an active
exception" abort at interpreter exit (issue 31). Runs jobs again and again, optionally beside busy processes
that load the machine (the aborts were races with interpreter finalization, more frequent under load):

    python bench/exit_stress.py                      # 200 jobs: single-process backward in both autograd
                                                     # modes and a 2-rank DDP + SyncBatchNorm job, in turn
    python bench/exit_stress.py --jobs 60 --load 2   # 2 busy-loop processes beside them

Prints each job kind's count of runs and of aborts (a negative return code or the message) and exits 1 if any.
tests/neuron/test_exit.py runs a short version.
"""
from __future__ import annotations

import argparse
import itertools
import multiprocessing
import os
import subprocess
import sys
import time
from collections import Counter

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

# Backward, then exit at once: the window in which an autograd worker may still hold the last graph.
# A hook makes the graph hold a Python object too, as training code's graphs do.
BACKWARD = """
import threading, torch, torchneuron_ext
x = torch.randn(4, device="neuron", requires_grad=True)
seen = []
x.register_hook(lambda g: seen.append(threading.current_thread()))
x.exp().sum().backward()
print(len(seen))
"""


def single_process(mode: str) -> tuple[bool, str]:
    env = dict(os.environ, TORCHNEURON_EXT_AUTOGRAD_THREADS=mode)
    r = subprocess.run([sys.executable, "-c", BACKWARD], env=env, capture_output=True, text=True, timeout=300)
    bad = r.returncode != 0 or "terminate called" in r.stderr
    return bad, r.stderr[-400:]


def distributed() -> tuple[bool, str]:
    from tests.distributed.launcher import run_ranks

    ranks = run_ranks("tests.distributed.workers.sync_batch_norm", timeout=170)
    bad = [r for r in ranks if r.returncode != 0 or "terminate called" in r.output]
    return bool(bad), " | ".join(r.output[-300:] for r in bad)


JOBS = {"backward, caller mode": lambda: single_process("caller"),
        "backward, device threads": lambda: single_process("device"),
        "2-rank DDP + SyncBatchNorm": distributed}


def _busy(stop: "multiprocessing.synchronize.Event") -> None:
    while not stop.is_set():
        sum(i * i for i in range(10000))


def run(jobs: int, load: int, kinds: list[str] | None = None, verbose: bool = True) -> Counter:
    stop = multiprocessing.Event()
    workers = [multiprocessing.Process(target=_busy, args=(stop,), daemon=True) for _ in range(load)]
    for w in workers:
        w.start()
    counts: Counter = Counter()
    try:
        for i, kind in zip(range(jobs), itertools.cycle(kinds or list(JOBS))):
            t = time.time()
            bad, detail = JOBS[kind]()
            counts[(kind, "runs")] += 1
            counts[(kind, "aborts")] += bad
            if verbose:
                print(f"{i:4d} {kind:28s} {time.time() - t:5.1f} s {'ABORT ' + detail if bad else 'ok'}", flush=True)
    finally:
        stop.set()
        for w in workers:
            w.join()
    return counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--load", type=int, default=0, help="busy-loop processes beside the jobs")
    args = ap.parse_args()
    counts = run(args.jobs, args.load)
    aborts = 0
    for kind in JOBS:
        print(f"{kind}: {counts[(kind, 'runs')]} runs, {counts[(kind, 'aborts')]} aborts")
        aborts += counts[(kind, "aborts")]
    sys.exit(1 if aborts else 0)


if __name__ == "__main__":
    main()
