#!/usr/bin/env python3
"""PyTorch's peers beside the points of index, store and decode-attention sweeps run through
gpuprofd, on the same GPU in the same run.

  sweep_torch_peers.py --gpuprof .carry/bin/gpuprof --target unix:/path/sock \
      --sweep swp-000001 [--sweep swp-000002 ...] --out-dir DIR

Reads each sweep's points (`gpuprof sweep get ID --json`) and the GPU's measured copy
bandwidth (`gpuprof gpus --json`), writes them as rows of torch_copy_peers.py (DIR/ours.jsonl),
and runs it: DIR/merged.jsonl and DIR/table.md hold ours, torch's best, the ratios and the
% of copy bandwidth of both. Sweeps should time in graph mode (`--graph 20`) as the peers do.

Decode points (8 KV heads, bf16, one head_dim a run; `--backend gpuprof,cudnn` for our cuDNN
backend beside our kernels) go to kernels/attention/torch_attention_peers.py --decode-grid instead, timed with
the L2 flushed as the daemon's `--l2 cold` does: DIR/decode_ours.csv and DIR/decode_table.md.
Prefill points (bf16, any heads and head_dim; ragged batches compared with our cuDNN backend
only) go to its --prefill-grid: DIR/prefill_ours.csv and DIR/prefill_table.md.
"""
import argparse
import json
import os
import subprocess
import sys

DTYPE_NAMES = {"DATA_TYPE_BF16": "bf16", "DATA_TYPE_FP16": "fp16", "DATA_TYPE_FP32": "fp32"}
BACKEND_NAMES = {"ATTENTION_BACKEND_GPUPROF": "gpuprof", "ATTENTION_BACKEND_CUDNN": "cudnn"}
# The decode layout torch_attention_peers.py's grid times (8 KV heads, bf16, these head dims).
ATTENTION_KV_HEADS, ATTENTION_HEAD_DIMS = 8, (64, 128, 256)
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
    elif request.get("attention", {}).get("phase") == "ATTENTION_PHASE_DECODE":
        spec = request["attention"]
        if int(spec.get("numKvHeads", 0)) != ATTENTION_KV_HEADS or \
                int(spec.get("headDim", 0)) not in ATTENTION_HEAD_DIMS or \
                spec.get("dtype") != "DATA_TYPE_BF16":
            return None  # torch_attention_peers.py times only its own head layout
        row.update(kind="decode", group=int(spec["numQoHeads"]) // ATTENTION_KV_HEADS,
                   batch=int(spec["batchSize"]), kv=int(spec["kvLen"]),
                   head_dim=int(spec["headDim"]), page_size=int(spec.get("pageSize", 16)),
                   backend=BACKEND_NAMES.get(spec.get("backend"), "gpuprof"),
                   l2=measurement.get("l2Mode", ""))
        tuning = result.get("kernelConfig", {}).get("decode_tuning", "")
        # "... : tensor_cores x16 (planned x4)": the pick follows the last colon.
        row["kernel"] = tuning.rsplit(": ", 1)[-1] if tuning else \
            result.get("kernelConfig", {}).get("launch", "")
    elif request.get("attention", {}).get("phase") == "ATTENTION_PHASE_PREFILL":
        spec = request["attention"]
        if spec.get("dtype") != "DATA_TYPE_BF16":
            return None  # torch_attention_peers.py times bf16
        q_lens = [int(n) for n in spec.get("qLens", [])]
        kv_lens = [int(n) for n in spec.get("kvLens", [])]
        row.update(kind="prefill", batch=len(q_lens) or int(spec.get("batchSize", 1)),
                   q_len=max(q_lens) if q_lens else int(spec["qLen"]),
                   kv_len=max(kv_lens) if kv_lens else int(spec["kvLen"]),
                   qo_heads=int(spec["numQoHeads"]), kv_heads=int(spec["numKvHeads"]),
                   head_dim=int(spec["headDim"]), causal=bool(spec.get("causal", False)),
                   # A ragged batch's lengths ("q/kv" per sequence), empty when uniform.
                   ragged=" ".join(f"{q}/{kv}" for q, kv in zip(q_lens, kv_lens)),
                   backend=BACKEND_NAMES.get(spec.get("backend"), "gpuprof"),
                   l2=measurement.get("l2Mode", ""),
                   tflops=measurement.get("tflops", 0.0),
                   pct_peak_flops=measurement.get("pctOfSpecPeakFlops", 0.0),
                   kernel=result.get("kernelConfig", {}).get("launch", ""))
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
    here = os.path.dirname(os.path.abspath(__file__))
    status = 0
    copy_rows = [row for row in rows if row["kind"] not in ("decode", "prefill")]
    if copy_rows:
        ours = os.path.join(args.out_dir, "ours.jsonl")
        with open(ours, "w") as out:
            for row in copy_rows:
                out.write(json.dumps(row) + "\n")
        status |= subprocess.run([sys.executable, os.path.join(here, "torch_copy_peers.py"),
                                  "--ours", ours,
                                  "--out", os.path.join(args.out_dir, "merged.jsonl"),
                                  "--table", os.path.join(args.out_dir, "table.md")]).returncode
    decode_rows = [row for row in rows if row["kind"] == "decode"]
    if decode_rows:
        status |= run_decode_peers(decode_rows, args.out_dir, here)
    prefill_rows = [row for row in rows if row["kind"] == "prefill"]
    if prefill_rows:
        status |= run_prefill_peers(prefill_rows, args.out_dir, here)
    return status


def split_backends(rows, shape_of):
    """Our kernels' measured rows, our cuDNN backend's by shape, and the points that did not
    finish verified (printed)."""
    failed = [r for r in rows if "median_us" not in r or not r.get("verified")]
    for r in failed:
        print(f"{r['kind']} point {r['experiment']} ({r['backend']}): "
              f"{r.get('error', 'not verified')}", file=sys.stderr)
    cudnn = {shape_of(r): r for r in rows if r["backend"] == "cudnn" and "median_us" in r}
    ours = [r for r in rows if r["backend"] == "gpuprof" and "median_us" in r]
    return ours, cudnn, failed


def run_attention_peers(phase, csv, out_dir, here, failed):
    """torch_attention_peers.py --PHASE-grid on the CSV: DIR/PHASE_table.md."""
    peers = os.path.join(here, "..", "kernels", "attention", "torch_attention_peers.py")
    status = subprocess.run([sys.executable, peers, f"--{phase}-grid", "--backends=flash,cudnn",
                             "--ours", csv,
                             "--table", os.path.join(out_dir, f"{phase}_table.md")]).returncode
    return status or (1 if failed else 0)


def all_cold(rows, kind):
    if all(r["l2"] == "L2_MODE_COLD" for r in rows):
        return True
    print(f"{kind} points must be timed with --l2 cold: the peers flush the L2 before every "
          "call", file=sys.stderr)
    return False


def run_prefill_peers(rows, out_dir, here):
    """Writes the prefill points as the CSV torch_attention_peers.py --prefill-grid reads (our
    kernels' rows, our cuDNN backend's time beside them when the sweep had it) and runs it."""
    shape_of = lambda r: (r["batch"], r["q_len"], r["kv_len"], r["qo_heads"], r["kv_heads"],
                          r["head_dim"], r["causal"], r["ragged"])
    ours, cudnn, failed = split_backends(rows, shape_of)
    if not ours or not all_cold(ours, "prefill"):
        return 1
    csv = os.path.join(out_dir, "prefill_ours.csv")
    with open(csv, "w") as out:
        out.write("flush,read\n")
        out.write("batch,q_len,kv_len,qo_heads,kv_heads,head_dim,causal,ragged,us,tflops,"
                  "pct_peak,kernel,cudnn_backend_us\n")
        for r in sorted(ours, key=lambda r: (r["head_dim"], r["ragged"] != "", r["q_len"],
                                             not r["causal"])):
            theirs = cudnn.get(shape_of(r))
            out.write(f"{r['batch']},{r['q_len']},{r['kv_len']},{r['qo_heads']},"
                      f"{r['kv_heads']},{r['head_dim']},{int(r['causal'])},{r['ragged']},"
                      f"{r['median_us']},{r['tflops']},{r['pct_peak_flops']},"
                      f"{r['kernel'].replace(',', ';')},"
                      f"{theirs['median_us'] if theirs else ''}\n")
    return run_attention_peers("prefill", csv, out_dir, here, failed)


def run_decode_peers(rows, out_dir, here):
    """Writes the decode points as the CSV torch_attention_peers.py --decode-grid reads (our
    kernels' rows, our cuDNN backend's time beside them when the sweep had it) and runs it."""
    ours, cudnn, failed = split_backends(rows, lambda r: (r["group"], r["batch"], r["kv"]))
    if not ours or not all_cold(ours, "decode"):
        return 1
    csv = os.path.join(out_dir, "decode_ours.csv")
    with open(csv, "w") as out:
        out.write(f"copy_gbs,{ours[0]['copy_gbps']}\n")
        # The daemon's cold L2 is a read of twice the L2 before every sample, as the peers'.
        out.write("flush,read\n")
        out.write("group,batch,kv,us,gbs,pct_copy,kernel,cudnn_backend_us,head_dim,page_size\n")
        for r in sorted(ours, key=lambda r: (r["batch"], r["kv"], r["group"])):
            theirs = cudnn.get((r["group"], r["batch"], r["kv"]))
            out.write(f"{r['group']},{r['batch']},{r['kv']},{r['median_us']},{r['gbps']},"
                      f"{r['pct_copy']},{r['kernel'].replace(',', ';')},"
                      f"{theirs['median_us'] if theirs else ''},{r['head_dim']},{r['page_size']}\n")
    return run_attention_peers("decode", csv, out_dir, here, failed)


if __name__ == "__main__":
    sys.exit(main())
