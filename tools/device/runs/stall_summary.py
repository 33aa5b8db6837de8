#!/usr/bin/env python3
"""Side-by-side summary of Nsight Compute's per-instruction warp-stall samples of several kernels.

    stall_summary.py NAME.sass.csv [NAME.sass.csv ...]

Each input is `ncu -i REPORT --page source --print-source sass --csv` of one kernel launch (as
prefill_stall_compare.sh writes them). Prints, one column a kernel: the samples by stall reason,
by what the instruction does (the attention kernels' softmax arithmetic, the wgmma wait and
issue, TMA issue, barriers, mbarrier polling), and the opcodes whose samples differ most between
the first kernel and each other one. Samples are taken at a fixed interval, so within one
launch they are proportional to warp time.
"""
import collections
import csv
import os
import re
import sys

SOFTMAX = ("FMNMX", "MUFU", "FADD", "FMUL", "FFMA", "F2FP", "SHFL", "FSETP", "FSEL")


def opcode(source):
    """The instruction's opcode with its modifiers, its predicate guard dropped."""
    return re.sub(r"^@!?U?P\w+\s+", "", source.strip()).split(" ")[0]


def region(op):
    if op.startswith(SOFTMAX):
        return "softmax arithmetic"
    if op.startswith("WARPGROUP.DEPBAR"):
        return "wgmma wait"
    if op.startswith(("HGMMA", "WARPGROUP.ARRIVE")):
        return "wgmma issue"
    if "TRYWAIT" in op or op == "YIELD" or op.startswith("BRA"):
        return "branches and mbarrier polling"
    if op.startswith("BAR"):
        return "named barriers"
    if op.startswith(("UTMALDG", "ELECT", "R2UR")):
        return "TMA issue and register-to-uniform moves"
    return "other (integer, uniform, memory)"


def load(path):
    rows = list(csv.reader(open(path, newline="")))
    # Row 0 names the kernel, row 1 holds the column titles.
    header = rows[1]
    index = {title: i for i, title in enumerate(header)}
    reasons = [t for t in header if t.startswith("stall_") and "Not Issued" not in t]
    by_reason, by_region, by_opcode = (collections.Counter() for _ in range(3))
    instructions = 0.0

    def number(row, title):
        try:
            return float(row[index[title]] or 0)
        except (KeyError, ValueError, IndexError):
            return 0.0

    for row in rows[2:]:
        op = opcode(row[index["Source"]])
        samples = number(row, "Warp Stall Sampling (All Samples)")
        instructions += number(row, "Instructions Executed")
        by_region[region(op)] += samples
        by_opcode[op] += samples
        for reason in reasons:
            by_reason[reason[len("stall_"):]] += number(row, reason)
    return {
        "kernel": rows[0][1] if len(rows[0]) > 1 else "",
        "instructions": instructions,
        "samples": sum(by_region.values()),
        "reason": by_reason,
        "region": by_region,
        "opcode": by_opcode,
    }


def table(title, names, counters, keys):
    print(f"\n{title}")
    print("| | " + " | ".join(names) + " |")
    print("|---" * (len(names) + 1) + "|")
    for key in keys:
        print(f"| {key} | " + " | ".join(f"{c[key]:.0f}" for c in counters) + " |")


def main(paths):
    names = [os.path.basename(p).removesuffix(".sass.csv") for p in paths]
    kernels = [load(p) for p in paths]
    for name, k in zip(names, kernels):
        print(f"{name}: {k['kernel'][:120]}")
    table("samples and instructions", names,
          [collections.Counter(samples=k["samples"], instructions=k["instructions"])
           for k in kernels], ["samples", "instructions"])
    for what, title in (("reason", "samples by stall reason"),
                        ("region", "samples by what the instruction does")):
        counters = [k[what] for k in kernels]
        keys = sorted(set().union(*counters), key=lambda key: -sum(c[key] for c in counters))
        table(title, names, counters, [key for key in keys if any(c[key] for c in counters)])
    base = kernels[0]["opcode"]
    for name, k in zip(names[1:], kernels[1:]):
        other = k["opcode"]
        keys = sorted(set(base) | set(other), key=lambda key: -abs(other[key] - base[key]))[:20]
        table(f"opcodes whose samples differ most, {names[0]} -> {name}", [names[0], name],
              [base, other], keys)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
