#!/usr/bin/env bash
# Runs manifests_test.mjs with Node's test runner (see that file).
set -euo pipefail
exec node --test "${TEST_SRCDIR}/${TEST_WORKSPACE}/deploy/k8s/manifests_test.mjs"
