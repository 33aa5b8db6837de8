#!/usr/bin/env bash
# A repeatable competing load for the load test: PROCS busy loops (default 1: one of a 2-core
# machine's cores) at nice 0 whatever the caller's niceness, for SECONDS (default 40), each a
# shell spinning without system calls, so the same CPU demand every run (unlike a build, whose
# demand depends on what is cached). Usage: tests/load/cpu_burner.sh [PROCS] [SECONDS]
set -euo pipefail
procs="${1:-1}"
seconds="${2:-40}"
pids=()
for _ in $(seq "$procs"); do
  nice -n "$((0 - $(nice)))" timeout "$seconds" sh -c 'while :; do :; done' &
  pids+=("$!")
done
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT INT TERM
wait "${pids[@]}" 2>/dev/null || true
