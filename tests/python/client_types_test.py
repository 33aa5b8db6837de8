"""The client's type annotations hold: mypy (Debian's python3-mypy) over python/gpuprof with
python/mypy.ini, every function annotated."""

from __future__ import annotations

import os
import sys

from mypy import api

RUNFILES = os.environ["GPUPROF_RUNFILES"]
PACKAGE = os.path.join(RUNFILES, "python", "gpuprof")

sources = sorted(
    os.path.join(PACKAGE, name) for name in os.listdir(PACKAGE) if name.endswith(".py")
)
out, err, status = api.run(
    [
        "--config-file", os.path.join(RUNFILES, "python", "mypy.ini"),
        "--cache-dir", os.path.join(os.environ.get("TEST_TMPDIR", "/tmp"), "mypy-cache"),
        *sources,
    ]
)
print(out, err, sep="")
if status != 0 or len(sources) < 5:
    sys.exit(1)
