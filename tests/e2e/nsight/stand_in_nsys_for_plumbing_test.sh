#!/bin/sh
# NOT Nsight Systems. A stand-in that nsight_capture_e2e_test gives gpuprofd as --nsys_path on a
# machine without Nsight or a GPU, to test the daemon's plumbing of a capture (the tool's
# command line, the worker's child run under it, the report kept, recorded, fetched, refused to
# others, kept across a restart). It runs the command it is given as nsys would, then writes a
# small file where nsys would write its report. Real nsys and ncu runs are on the GPU machine:
# tools/device/runs/nsight_capture.sh.
set -eu
if [ "${1:-}" = "--version" ]; then
  echo "stand-in nsys for the plumbing test (not NVIDIA Nsight Systems)"
  exit 0
fi
[ "${1:-}" = "profile" ] || { echo "stand-in nsys: expected 'profile', got '${1:-}'" >&2; exit 64; }
shift
output=""
while [ $# -gt 0 ]; do
  case "$1" in
    --output) output="$2"; shift 2 ;;
    --*) shift ;;
    *) break ;;
  esac
done
[ -n "$output" ] || { echo "stand-in nsys: no --output" >&2; exit 64; }
"$@"
{
  echo "stand-in report for gpuprof's capture plumbing test"
  echo "command: $*"
} > "$output"
