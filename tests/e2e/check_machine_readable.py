#!/usr/bin/env python3
"""Checks that gpuprof's machine-readable outputs read back with nothing but the standard
library, the way a script, jq or pandas would read them.

usage: check_machine_readable.py DIR

DIR holds what the CLI printed: list.ndjson (list --json), sweep_list.ndjson, sweep.csv and
sweep.jsonl (sweep get --format csv|jsonl of one sweep), compare.csv and compare.jsonl
(compare --format csv and compare --json of two sweeps). Exits 1 naming every problem.
"""
import csv
import json
import math
import os
import re
import sys

problems = []


def problem(text):
    problems.append(text)


def read(directory, name):
    with open(os.path.join(directory, name), encoding="utf-8") as f:
        return f.read()


def json_lines(text, name):
    """NDJSON: every line one JSON object."""
    objects = []
    for number, line in enumerate(text.splitlines(), 1):
        try:
            value = json.loads(line)
        except ValueError as error:
            problem(f"{name}:{number}: not JSON ({error}): {line[:120]}")
            continue
        if not isinstance(value, dict):
            problem(f"{name}:{number}: a JSON {type(value).__name__}, not an object")
            continue
        objects.append(value)
    return objects


def no_nan(text, name):
    if re.search(r"\b(nan|inf|NaN|Infinity)\b", text):
        problem(f"{name}: holds nan or inf")


def check_same_rows(csv_text, objects, name):
    """CSV and JSON lines of the same rows: the same columns in the same order, and every
    number the same double (full precision in both)."""
    rows = list(csv.DictReader(csv_text.splitlines()))
    if not objects:
        problem(f"{name}: no rows")
        return
    header = list(csv.reader(csv_text.splitlines()))[0]
    if header != list(objects[0].keys()):
        problem(f"{name}: CSV columns {header} != JSON keys {list(objects[0].keys())}")
    if len(rows) != len(objects):
        problem(f"{name}: {len(rows)} CSV rows, {len(objects)} JSON lines")
    for row, obj in zip(rows, objects):
        if list(obj.keys()) != header:
            problem(f"{name}: a JSON line has other keys: {list(obj.keys())}")
        for column in header:
            text, value = row.get(column, ""), obj.get(column)
            if value is None:
                if text != "":
                    problem(f"{name}: {column} is null in JSON but {text!r} in CSV")
            elif isinstance(value, bool) or not isinstance(value, (int, float)):
                if text != str(value):
                    problem(f"{name}: {column} {value!r} in JSON, {text!r} in CSV")
            else:
                if float(text) != float(value):
                    problem(f"{name}: {column} {value!r} in JSON, {text!r} in CSV")
                if float(value).is_integer() and not re.fullmatch(r"-?\d+", text):
                    problem(f"{name}: {column} is the integer {value} but prints {text!r}")


def main():
    directory = sys.argv[1]

    listed = json_lines(read(directory, "list.ndjson"), "list.ndjson")
    if len(listed) < 4 or any(not str(e.get("id", "")).startswith("exp-") for e in listed):
        problem(f"list.ndjson: want one Experiment per line, got {listed[:2]}")

    sweeps = json_lines(read(directory, "sweep_list.ndjson"), "sweep_list.ndjson")
    if len(sweeps) != 2 or any(not str(s.get("id", "")).startswith("swp-") for s in sweeps):
        problem(f"sweep_list.ndjson: want two Sweeps, got {sweeps}")

    sweep_csv = read(directory, "sweep.csv")
    sweep_jsonl = read(directory, "sweep.jsonl")
    no_nan(sweep_csv, "sweep.csv")
    no_nan(sweep_jsonl, "sweep.jsonl")
    points = json_lines(sweep_jsonl, "sweep.jsonl")
    check_same_rows(sweep_csv, points, "sweep")
    if sorted(p.get("point") for p in points) != [0, 1]:
        problem(f"sweep.jsonl: points {[p.get('point') for p in points]}, want 0 and 1")
    for point in points:
        for column in ("figure", "value", "unit", "experiment", "state", "samples"):
            if point.get(column) in (None, ""):
                problem(f"sweep.jsonl: point {point.get('point')} has no {column}")
        noise = point.get("noise")
        if noise is not None and (not isinstance(noise, (int, float)) or noise < 0):
            problem(f"sweep.jsonl: noise {noise!r} is not a number >= 0 or null")

    compare_csv = read(directory, "compare.csv")
    compare_jsonl = read(directory, "compare.jsonl")
    no_nan(compare_csv, "compare.csv")
    no_nan(compare_jsonl, "compare.jsonl")
    compared = json_lines(compare_jsonl, "compare.jsonl")
    check_same_rows(compare_csv, compared, "compare")
    if len(compared) != 2:
        problem(f"compare.jsonl: {len(compared)} points, want 2")
    for point in compared:
        for column in ("point", "a", "b", "unit", "ratio", "verdict"):
            if point.get(column) in (None, ""):
                problem(f"compare.jsonl: a point has no {column}: {point}")
        if isinstance(point.get("a"), (int, float)) and point["a"] > 0:
            if not math.isfinite(point["b"] / point["a"]):
                problem(f"compare.jsonl: a ratio that is not finite: {point}")

    for text in problems:
        print(text, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
