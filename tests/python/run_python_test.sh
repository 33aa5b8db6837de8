#!/usr/bin/env bash
# run_python_test.sh SCRIPT: runs a test script of this package with Debian's python3 (its
# python3-grpcio, python3-protobuf, python3-pandas and python3-mypy; tools/setup.sh installs
# them) and the client package from the runfiles, where python/gpuprof's sources and the
# gpuprof.v1 modules //python:stubs generated meet.
set -euo pipefail
runfiles="${TEST_SRCDIR:-$0.runfiles}/${TEST_WORKSPACE:-gpuprof}"
python=/usr/bin/python3
if ! "$python" -c 'import grpc, google.protobuf, pandas' 2>/dev/null; then
  echo "run_python_test: $python lacks python3-grpcio, python3-protobuf or python3-pandas" \
       "(run tools/setup.sh)" >&2
  exit 1
fi
export GPUPROF_RUNFILES="$runfiles"
export PYTHONPATH="$runfiles/python"
# No config file or environment of the user's steers the client under test.
export GPUPROF_CONFIG=/dev/null
unset GPUPROF_TARGET GPUPROF_TOKEN
exec "$python" -B "$runfiles/tests/python/$1"
