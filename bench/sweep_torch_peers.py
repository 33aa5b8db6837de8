#!/usr/bin/env python3
"""PyTorch's peers beside the points of index and store sweeps run through gpuprofd, on the
same GPU in the same run.

  sweep_torch_peers.py --gpuprof .carry/bin/gpuprof --target unix:/path/sock \
      --sweep swp-000001 [--sweep swp-000002 ...] --out-dir DIR

Reads each sweep's points (`gpuprof sweep get ID --json`) and the GPU's measured copy
bandwidth (`gpuprof gpus --json`), writes them as rows of torch_copy_peers.py (DIR/ours.jsonl),
and runs it: DIR/merged.jsonl and DIR/table.md hold ours, torch's best, the ratios and the
% of copy bandwidth of both. Sweeps should time in graph mode (`--graph 20`) as the peers do.
"""
import argparse
import json
import os
import subprocess
import sys

DTYPE_NAMES = {"DATA_TYPE_BF16": "bf16", "DATA_TYPE_FP16": "fp16", "DATA_TYPE_FP32": "fp32"}
PATTERN_NAMES = {"SLOT_PATTERN_SEQUENTIAL": "sequential", "SLOT_PATTERN_RANDOM": "random",
                 "SLOT_PATTERN_SORTED": "sorted"}


def gpuprof_json(args, *command):
    output = subprocess.run([args.gpuprof, f"--target={args.target}", *command, "--json"],
                            check=True, capture_output=True, text=True).stdout
    return json.loads(output)


def row_for(experiment, gpus):
    request = experiment["request"]
    result = experiment.get("result", {})
    measurement = result.get("measurement", {})
    gpu_ids = experiment.get("gpuIds", [0])
    gpu = gpus.get(gpu_ids[0] if gpu_ids else 0, {})
    row = {"experiment": experiment["id"], "device": gpu.get("name", "?"),
           "copy_gbps": gpu.get("measuredCopyBandwidthGbps", 0.0),
           "mode": "graph" if measurement.get("usedCudaGraph") else "single"}
    if "index" in request:
        spec = request["index"]
        row.update(kind="index", tokens=int(spec["numTokens"]), hidden=int(spec["hiddenDim"]),
                   vocab=int(spec["vocabSize"]), dtype=DTYPE_NAMES[spec["dtype"]])
    elif "store" in request:
        spec = request["store"]
        row.update(kind="store", tokens=int(spec["numTokens"]), kv_heads=int(spec["numKvHeads"]),
                   head_dim=int(spec["headDim"]), cache_slots=int(spec["cacheSlots"]),
                   dtype=DTYPE_NAMES[spec["dtype"]],
                   pattern=PATTERN_NAMES[spec.get("slotPattern", "SLOT_PATTERN_SEQUENTIAL")],
                   launch="separate" if spec.get("launch") == "STORE_LAUNCH_SEPARATE_KV"
                   else "fused")
    else:
        return None
    if experiment.get("state") != "FINISHED" or not measurement:
        row["error"] = experiment.get("reason", experiment.get("state", "no result"))
        return row
    row.update(median_us=measurement["kernelTime"]["medianUs"],
               gbps=measurement.get("bandwidthGbps", 0.0),
               pct_copy=measurement.get("pctOfMeasuredCopyBandwidth", 0.0),
               bytes=int(measurement.get("bytesMoved", 0)),
               verified=result.get("verification", {}).get("passed", False),
               noise=measurement["kernelTime"].get("relativeNoise", 0.0))
    return row


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpuprof", required=True)
    parser.add_argument("--target", required=True)
    parser.add_argument("--sweep", action="append", required=True)
    parser.add_argument("--out-dir", required=True)
    args = parser.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    gpus = {int(g.get("index", 0)): g for g in gpuprof_json(args, "gpus").get("gpus", [])}
    rows = []
    for sweep_id in args.sweep:
        sweep = gpuprof_json(args, "sweep", "get", sweep_id)
        for point in sweep.get("points", []):
            experiment = point.get("experiment")
            if experiment is None:
                experiment = gpuprof_json(args, "get", point["experimentId"])
            row = row_for(experiment, gpus)
            if row is not None:
                rows.append(row)
    ours = os.path.join(args.out_dir, "ours.jsonl")
    with open(ours, "w") as out:
        for row in rows:
            out.write(json.dumps(row) + "\n")
    peers = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_copy_peers.py")
    return subprocess.run([sys.executable, peers, "--ours", ours,
                           "--out", os.path.join(args.out_dir, "merged.jsonl"),
                           "--table", os.path.join(args.out_dir, "table.md")]).returncode


if __name__ == "__main__":
    sys.exit(main())
