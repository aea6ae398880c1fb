#!/usr/bin/env python3
"""Compare two bench.py result files (JSON) shape by shape.

    python3 bench/compare_runs.py OLD.json NEW.json [--methods int8attn_fast,int8attn_balanced]

Prints a markdown table: for each shape and method, the speed-up over cuDNN in each run and
the new/old ratio of int8attn's own time, plus the geometric means. Two runs on different
machines of one kind differ in cuDNN's time as well as ours, so both columns are shown; a change
smaller than the spread between two runs of the same build (a few %) is noise.
"""
import argparse
import json
import math
import sys

DEFAULT_METHODS = ["int8attn_exact", "int8attn_balanced", "int8attn_fast",
                   "int8attn_fast_kblock", "int8attn_balanced_kernel", "int8attn_fast_kernel"]


def load(path):
    with open(path) as f:
        data = json.load(f)
    return {r["name"]: r for r in data["results"]}, data.get("meta", {})


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--methods", default=",".join(DEFAULT_METHODS))
    args = ap.parse_args()
    old, old_meta = load(args.old)
    new, new_meta = load(args.new)
    methods = args.methods.split(",")
    print(f"old: `{args.old}` ({old_meta.get('gpu', '?')})  \nnew: `{args.new}` "
          f"({new_meta.get('gpu', '?')})\n")
    print("| shape | method | x cuDNN old | x cuDNN new | time new/old |")
    print("|---|---|---|---|---|")
    logs = {m: [] for m in methods}
    for name, r in new.items():
        if name not in old:
            continue
        for m in methods:
            a, b = old[name]["methods"].get(m), r["methods"].get(m)
            if not a or not b or not a.get("ms") or not b.get("ms"):
                continue
            t = b["ms"] / a["ms"]
            logs[m].append(math.log(t))
            print(f"| {name} | {m} | {a['speedup_vs_cudnn']:.2f} | {b['speedup_vs_cudnn']:.2f} "
                  f"| {t:.3f} |")
    print("\n| method | shapes | geometric mean of time new/old | min | max |")
    print("|---|---|---|---|---|")
    for m, v in logs.items():
        if v:
            print(f"| {m} | {len(v)} | {math.exp(sum(v) / len(v)):.3f} | {math.exp(min(v)):.3f} "
                  f"| {math.exp(max(v)):.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
