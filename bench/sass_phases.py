#!/usr/bin/env python3
"""Where a kernel's warps spend their time, phase by phase: sums Nsight Compute's per-instruction
stall samples (the SASS CSV that bench/profile_kernel.sh writes with `ncu --page source
--print-source sass --csv`) over the stretches of code between barriers (BAR, cluster barrier
arrive/wait, mbarrier waits, EXIT) and prints one line per stretch: its share of all samples,
its instruction count, the top stall reasons, the commonest opcodes and its excess shared-memory
wavefronts (bank conflicts).

    python3 bench/sass_phases.py sass_sd15_l3_cfg_fast.csv [--min-share 0.5]
"""
import argparse
import collections
import csv

BOUNDARIES = ("BAR", "UCGABAR_WAIT", "UCGABAR_ARV", "SYNCS", "EXIT")


def opcode(source: str) -> str:
    words = source.split()
    if not words:
        return ""
    op = words[1] if words[0].startswith("@") and len(words) > 1 else words[0]
    return op.split(".")[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", help="ncu --page source --print-source sass --csv output")
    ap.add_argument("--min-share", type=float, default=0.0,
                    help="hide stretches with less than this percentage of the samples")
    args = ap.parse_args()
    rows = list(csv.reader(open(args.csv, newline="")))
    # Row 0 names the kernel; row 1 is the header.
    header, data = rows[1], rows[2:]
    col = {h: i for i, h in enumerate(header)}
    samples_col = col["Warp Stall Sampling (All Samples)"]
    excess_col = col.get("L1 Wavefronts Shared Excessive")
    stall_cols = [h for h in header if h.startswith("stall_") and "Not Issued" not in h]

    def num(row, i):
        v = row[i] if i is not None else ""
        return int(v) if v.strip().isdigit() else 0

    total = sum(num(r, samples_col) for r in data) or 1
    print(f"{rows[0][1] if len(rows[0]) > 1 else rows[0][0]}")
    print(f"{total} samples over {len(data)} instructions")
    stalls, ops = collections.Counter(), collections.Counter()
    samples = excess = count = 0
    start = 0
    for i, r in enumerate(data):
        src = r[col["Source"]].strip()
        op = opcode(src)
        s = num(r, samples_col)
        samples += s
        count += 1
        ops[op] += 1
        excess += num(r, excess_col)
        for h in stall_cols:
            stalls[h] += num(r, col[h])
        if op in BOUNDARIES or i == len(data) - 1:
            share = 100.0 * samples / total
            if share >= args.min_share:
                top = ", ".join(f"{k[6:]} {100 * v // max(samples, 1)}%"
                                for k, v in stalls.most_common(4) if v)
                common = " ".join(f"{k}:{v}" for k, v in ops.most_common(5))
                print(f"[{start:5d}-{i + 1:5d}] {share:5.1f}% {count:5d} instr, ends "
                      f"{src[:26]:26s} | {top} | {common} | excess wavefronts {excess}")
            stalls, ops = collections.Counter(), collections.Counter()
            samples = excess = count = 0
            start = i + 1


if __name__ == "__main__":
    main()
