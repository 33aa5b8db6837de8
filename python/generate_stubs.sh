#!/usr/bin/env bash
# Generates the Python modules of the gpuprof.v1 API (messages and the Profiler service stub)
# from proto/gpuprof/v1/*.proto with the system protoc and grpc_python_plugin (Debian's
# protobuf-compiler and protobuf-compiler-grpc; python3-grpc-tools cannot compile these protos).
#   generate_stubs.sh OUT_DIR [PROTO_ROOT]
# writes OUT_DIR/gpuprof/v1/*.py; PROTO_ROOT defaults to the repository's proto/. tools/setup.sh
# and `pip install ./python` write into python/ (the ignored python/gpuprof/v1/), the Bazel
# genrule //python:stubs into its output tree.
set -euo pipefail
out_dir="$1"
proto_root="${2:-$(cd "$(dirname "$0")/../proto" && pwd)}"
plugin="$(command -v grpc_python_plugin || true)"
if [ -z "$plugin" ]; then
  echo "generate_stubs.sh: grpc_python_plugin not found (apt-get install protobuf-compiler-grpc)" >&2
  exit 1
fi
mkdir -p "$out_dir/gpuprof/v1"
protoc --proto_path="$proto_root" --proto_path=/usr/include --python_out="$out_dir" \
  "$proto_root"/gpuprof/v1/{access,experiment,gpus,profiler,sweep,workloads}.proto
# Only profiler.proto has a service; the plugin writes an empty module for the others.
protoc --proto_path="$proto_root" --proto_path=/usr/include --grpc_out="$out_dir" \
  --plugin=protoc-gen-grpc="$plugin" "$proto_root/gpuprof/v1/profiler.proto"
echo '"""Generated from proto/gpuprof/v1 by python/generate_stubs.sh; do not edit."""' \
  >"$out_dir/gpuprof/v1/__init__.py"
