#!/usr/bin/env python3
"""Sums an Nsight Compute CSV of gpu__time_duration by kernel name (scripts/device-gpu-checks.sh's `kernels` step).

    ncu --metrics gpu__time_duration.sum --csv --log-file K.csv PROGRAM ...
    scripts/ncu-kernel-table.py K.csv [--per NAME --per-count N]

Prints one row per kernel (launches, total and mean microseconds, share), largest first, then the total. With
--per NAME and --per-count N, the launches of kernel NAME over N count the units (tokens) the totals are divided
by: e.g. `--per embedding_forward_k` (one launch a decode step; a window of launches that cuts tokens at both ends
makes that per-unit figure approximate: gpu-runs/2026-11-27-h200-s20 sums whole tokens). Standard library only.
"""
import argparse
import csv
import re
import sys
from collections import defaultdict

UNITS = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3, "second": 1e6, "s": 1e6}


def short_name(name):
    """'void ns::(anonymous namespace)::kernel_k<true, ...>(float *, ...)' -> 'kernel_k<true, ...>'"""
    name = re.sub(r"^(void\s+)?([\w:]*::)?<?unnamed>::", "", name)   # ncu writes the anonymous namespace either way
    depth, cut = 0, len(name)
    for i, ch in enumerate(name):   # the argument list: the last top-level '(' at template depth 0
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(depth - 1, 0)
        elif ch == "(" and depth == 0 and not name.startswith("(anonymous", i):
            cut = i
    base = name[:cut].strip()
    base = re.sub(r"^void\s+", "", base)
    base = base.replace("(anonymous namespace)::", "")
    return re.sub(r"(\w+::)+", "", base)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("--per", help="a kernel launched --per-count times a unit (token)")
    ap.add_argument("--per-count", type=int, default=1)
    a = ap.parse_args()
    with open(a.csv, newline="") as f:
        lines = f.read().splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    if start is None:
        sys.exit(f"{a.csv}: no ncu CSV header (\"ID\", ...): did ncu profile any kernel?")
    total, count = defaultdict(float), defaultdict(int)
    for row in csv.DictReader(lines[start:]):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        unit = UNITS.get(row.get("Metric Unit", "").strip())
        if unit is None:
            sys.exit(f"{a.csv}: unknown time unit {row.get('Metric Unit')!r}")
        name = short_name(row["Kernel Name"])
        total[name] += float(row["Metric Value"].replace(",", "")) * unit
        count[name] += 1
    if not total:
        sys.exit(f"{a.csv}: no gpu__time_duration rows")
    units = sum(n for k, n in count.items() if k.split("<")[0] == a.per) / a.per_count if a.per else 0
    grand = sum(total.values())
    print(f"{'kernel':<60} {'launches':>8} {'total us':>10} {'mean us':>8} {'share':>6}"
          + (f" {'us a unit':>10}" if units else ""))
    for name in sorted(total, key=total.get, reverse=True):
        line = f"{name[:60]:<60} {count[name]:>8} {total[name]:>10.1f} {total[name] / count[name]:>8.2f} {total[name] / grand:>6.1%}"
        print(line + (f" {total[name] / units:>10.2f}" if units else ""))
    print(f"{'total':<60} {sum(count.values()):>8} {grand:>10.1f}" + (f" {'':>8} {'':>6} {grand / units:>10.2f}" if units else ""))
    if units:
        print(f"(a unit: {a.per_count} launches of {a.per}; {units:g} units)")


if __name__ == "__main__":
    main()
