"""Generates the gpuprof.v1 modules from ../proto when they are not there yet (a clean clone
that never ran tools/setup.sh), before setuptools looks for the packages; pyproject.toml holds
everything else."""

import os
import subprocess

from setuptools import setup

HERE = os.path.dirname(os.path.abspath(__file__))

if not os.path.exists(os.path.join(HERE, "gpuprof", "v1", "profiler_pb2_grpc.py")):
    subprocess.run([os.path.join(HERE, "generate_stubs.sh"), HERE], check=True)

setup()
