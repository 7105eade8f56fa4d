"""What the autoload adds to `import torch`: fresh interpreters, side by side, median of N runs.

    python bench/import_cost.py [--runs 15]
"""
import argparse
import os
import statistics
import subprocess
import sys
import time


def time_import(env: dict, runs: int) -> float:
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import torch"], env=env, check=True)
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    base = dict(os.environ)
    off = dict(base, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    on = dict(base, TORCH_DEVICE_BACKEND_AUTOLOAD="1")
    time_import(on, 2)  # warm the page cache for both
    # Interleave so that drift on the machine hits both equally.
    t_off, t_on = [], []
    for _ in range(args.runs):
        t_off.append(time_import(off, 1))
        t_on.append(time_import(on, 1))
    m_off, m_on = statistics.median(t_off), statistics.median(t_on)
    print(f"import torch, autoload off : {m_off * 1000:8.1f} ms (median of {args.runs})")
    print(f"import torch, autoload on  : {m_on * 1000:8.1f} ms")
    print(f"added by torchneuron_ext   : {(m_on - m_off) * 1000:8.1f} ms   (goal < 500 ms)")
    print(f"ratio on/off               : {m_on / m_off:8.2f}x")


if __name__ == "__main__":
    main()
