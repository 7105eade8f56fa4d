"""The cost model beside every public Trainium measurement it can reproduce: the validation table of
docs/cost_model.md.

    python bench/costmodel_validation.py                 # the Markdown table, its summary, the family table
    python bench/costmodel_validation.py --only collectives
    python bench/costmodel_validation.py --json after.json --before before.json

The rows live in bench/costmodel_rows/ (one module per family of measurements). ``--json`` saves each
row's projection; ``--before`` adds the projections of an earlier run as a "before" column, e.g. of the
model as it was before a revision: ``PYTHONPATH=<old checkout> python bench/costmodel_validation.py --json
before.json`` (the rows use only the public API that both versions have).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import traceback

sys.path.insert(0, os.path.dirname(__file__))

from costmodel_rows import Row, all_rows  # noqa: E402

WITHIN = 1.5          # the goal: every row within 1.5x ...
MEDIAN_WITHIN = 1.25  # ... and the median row within 1.25x


def fmt(s: float) -> str:
    if s != s:
        return "error"
    return f"{s * 1e3:.3g} ms" if s >= 1e-3 else f"{s * 1e6:.3g} us"


def off_by(ratio: float) -> float:
    """How far a projected/measured ratio is from 1, as a factor either way (0.5 and 2 are both 2x)."""
    return max(ratio, 1 / ratio) if ratio > 0 else math.inf


def project(row: Row) -> float:
    try:
        return float(row.project())
    except Exception:  # one broken row must not hide the others: it shows as "error"
        traceback.print_exc(file=sys.stderr)
        return math.nan


def summary(ratios: list[float], label: str) -> str:
    ok = [r for r in ratios if r == r]
    if not ok:
        return f"{label}: no rows"
    offs = sorted(off_by(r) for r in ok)
    within = sum(o <= WITHIN for o in offs)
    return (f"{label}: {within} of {len(ok)} rows within {WITHIN}x, median {statistics.median(offs):.2f}x off "
            f"(goal: all within {WITHIN}x, median within {MEDIAN_WITHIN}x)")


# How the per-family summary names each row group.
FAMILIES = {
    "collectives": "collectives (nccom-test, trn1 and trn2)",
    "llm": "LLM decode per token, TP 24-64",
    "models": "whole models (encoders, ViT, CNNs, training micro-steps)",
    "matmul": "matmul (NKI tutorial variants, a trn2 BF16 GEMM sweep, per-call GEMMs)",
    "nki": "NKI instructions and DMA",
    "launch": "launch",
}


def family_table(rows: list[Row], projected: dict[str, float], before: dict[str, float] | None) -> list[str]:
    """One line per row group: its rows, how many are within WITHIN and the median off, before and after, and
    how many the model claims to explain (no reason given)."""
    head = ["family", "rows"]
    if before is not None:
        head += [f"within {WITHIN}x before", "median off before"]
    head += [f"within {WITHIN}x after", "median off after", "rows explained"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    groups: dict[str, list[Row]] = {}
    for r in rows:
        groups.setdefault(r.group, []).append(r)
    for group, members in groups.items():
        cells = [FAMILIES.get(group, group), str(len(members))]
        columns = [] if before is None else [[before_of(r, before) for r in members]]
        columns.append([projected[r.key] for r in members])
        for values in columns:
            offs = [off_by(v / r.measured_s) for v, r in zip(values, members) if v == v]
            cells += [str(sum(o <= WITHIN for o in offs)), f"{statistics.median(offs):.2f}x" if offs else "-"]
        cells.append(str(sum(not r.reason for r in members)))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def before_of(row: Row, before: dict[str, float]) -> float:
    """The row's projection in an earlier run (under its former key if its description was corrected)."""
    b = before.get(row.key, before.get(row.former_key, math.nan))
    return math.nan if b is None else b


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", action="append", default=[], help="a row group (repeatable)")
    ap.add_argument("--json", help="save each row's projection (seconds) here")
    ap.add_argument("--before", help="a --json file of an earlier run, shown as the 'before' column")
    args = ap.parse_args(argv)

    rows = [r for r in all_rows() if not args.only or r.group in args.only]
    before = json.load(open(args.before)) if args.before else None
    projected = {r.key: project(r) for r in rows}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(projected, f, indent=1)

    head = ["group", "kernel", "shape", "dtype", "target", "measured", "includes"]
    if before is not None:
        head += ["before", "before/measured"]
    head += ["projected", "projected/measured", "source", "not explained by the model"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    ratios, ratios_before = [], []
    for r in rows:
        p = projected[r.key]
        cells = [r.group, r.kernel, r.shape, r.dtype, r.target, fmt(r.measured_s), r.includes]
        if before is not None:
            b = before_of(r, before)
            cells += [fmt(b), f"{b / r.measured_s:.2f}" if b == b else "new row"]
            ratios_before.append(b / r.measured_s)
        ratio = p / r.measured_s
        ratios.append(ratio)
        cells += [fmt(p), f"{ratio:.2f}", r.source, r.reason]
        print("| " + " | ".join(cells) + " |")
    print()
    if before is not None:
        print(summary(ratios_before, "before"))
    print(summary(ratios, "projected"))
    explained = [p / r.measured_s for r in rows if not r.reason for p in [projected[r.key]]]
    print(summary(explained, "rows the model claims to explain"))
    print()
    print("\n".join(family_table(rows, projected, before)))


if __name__ == "__main__":
    main()
