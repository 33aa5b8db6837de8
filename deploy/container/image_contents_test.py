#!/usr/bin/env python3
"""The image holds what the binaries load and nothing more.

Stages the image's build context from the real Bazel outputs with stage.sh, then checks every
library each staged binary links (DT_NEEDED) against where the image gets it: the CUDA
libraries staged beside the binaries, a Debian package the Containerfile installs, or
debian:12-slim itself. Every package the Containerfile installs must be needed by some
binary (tini aside: it is PID 1). cuDNN, where the build host has it, is staged whole."""
import os
import re
import subprocess
import sys
import tempfile
import unittest

RUNFILES = os.path.join(os.environ.get("TEST_SRCDIR", "."), os.environ.get("TEST_WORKSPACE", ""))
HERE = os.path.join(RUNFILES, "deploy/container")
# Packages of debian:12-slim that these libraries come from.
BASE_IMAGE_PACKAGES = {"libc6", "libgcc-s1", "libstdc++6", "zlib1g"}
# Not libraries the binaries link: the init process.
NOT_LINKED = {"tini"}
# Loaded at run time (dlopen): NVRTC by the worker (common/nvrtc_on_demand.cc), its builtins
# by NVRTC, the nvperf libraries by CUPTI's metrics.
DLOPENED_CUDA = [r"libnvrtc\.so\.[0-9.]+", r"libnvrtc-builtins\.so\.[0-9.]+", r"libnvperf_host\.so",
                 r"libnvperf_target\.so"]


def containerfile_packages():
    text = open(os.path.join(HERE, "Containerfile")).read()
    block = text.split("# packages-begin", 1)[1].split("# packages-end", 1)[0]
    words = re.findall(r"^\s+([a-z0-9][a-z0-9.+-]+) \\$", block, re.MULTILINE)
    return set(words)


def needed(binary):
    out = subprocess.run(["readelf", "-d", binary], capture_output=True, text=True,
                         check=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def resolved(binary):
    """The loader's path for each library `binary` loads, by soname."""
    out = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True).stdout
    return {m.group(1): m.group(2) for m in re.finditer(r"^\s+(\S+) => (/\S+)", out, re.M)}


def owners(paths):
    """The Debian package of each library path (None when none owns it), in one dpkg call."""
    candidates = {path: [path, os.path.realpath(path)] for path in paths}
    every = sorted({c for cs in candidates.values() for c in cs})
    out = subprocess.run(["dpkg", "-S"] + every, capture_output=True, text=True).stdout
    package_of = {}
    for line in out.splitlines():
        package, _, owned = line.partition(": ")
        package_of[owned.strip()] = package.split(":")[0]
    return {path: next((package_of[c] for c in cs if c in package_of), None)
            for path, cs in candidates.items()}


class ImageContentsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.context = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        env = dict(os.environ, BIN_DIR=RUNFILES)
        subprocess.run([os.path.join(HERE, "stage.sh"), cls.context], env=env, check=True)
        cls.binaries = [os.path.join(cls.context, "bin", name)
                        for name in ("gpuprofd", "gpuprof_worker", "gpuprof")]
        cls.cuda = set(os.listdir(os.path.join(cls.context, "cuda")))
        # soname -> (path, package) per binary, for the libraries it links itself.
        cls.links = {}
        for binary in cls.binaries:
            paths = resolved(binary)
            cls.links[binary] = {soname: paths.get(soname) for soname in needed(binary)}
        every_path = {p for links in cls.links.values() for p in links.values() if p}
        cls.package_of = owners(every_path)

    def test_every_linked_library_has_a_source_in_the_image(self):
        installed = containerfile_packages()
        for binary, links in self.links.items():
            for soname, path in links.items():
                if soname in self.cuda or soname.startswith("ld-linux"):
                    continue
                self.assertIsNotNone(path, f"{binary}: {soname} not found here")
                package = self.package_of[path]
                self.assertIsNotNone(package, f"{soname} ({path}) is in no package")
                self.assertIn(package, installed | BASE_IMAGE_PACKAGES,
                              f"{os.path.basename(binary)} links {soname} from {package}, "
                              "which the Containerfile does not install")

    def test_every_installed_package_is_needed(self):
        used = {self.package_of[path] for links in self.links.values()
                for soname, path in links.items() if path and soname not in self.cuda}
        for package in sorted(containerfile_packages() - NOT_LINKED):
            self.assertIn(package, used, f"the Containerfile installs {package}, which no "
                                         "binary links")

    def test_cuda_libraries_are_staged_and_no_driver_library_is(self):
        worker = os.path.join(self.context, "bin", "gpuprof_worker")
        for soname in needed(worker):
            if re.match(r"lib(nccl|cupti|nvrtc)\.", soname):
                self.assertIn(soname, self.cuda)
        for pattern in DLOPENED_CUDA:
            self.assertTrue(any(re.fullmatch(pattern, name) for name in self.cuda),
                            f"{pattern} not staged")
        # The NVIDIA runtime injects the driver's own; a copy would mismatch the node's driver.
        for name in self.cuda:
            self.assertFalse(re.match(r"lib(cuda|nvidia-ml)\.so", name), name)

    def test_cudnn_is_staged_where_the_build_host_has_it(self):
        cuda = os.environ.get("CUDA_PATH", "/usr/local/cuda")
        where = [d for d in (f"{cuda}/lib64", f"{cuda}/lib", "/usr/lib/x86_64-linux-gnu")
                 if os.path.exists(os.path.join(d, "libcudnn.so.9"))]
        if not where:
            self.skipTest("no cuDNN 9 on this machine")
        cudnn = {name for name in os.listdir(where[0])
                 if re.fullmatch(r"libcudnn(_[a-z_]+)?\.so\.9", name)}
        self.assertIn("libcudnn_graph.so.9", cudnn)
        self.assertLessEqual(cudnn, self.cuda, "stage.sh leaves out part of cuDNN")
        # What cuDNN links beyond itself comes with the image's base.
        libraries = {os.path.join(where[0], name): needed(os.path.join(where[0], name))
                     for name in sorted(cudnn)}
        paths = {}
        for library, sonames in libraries.items():
            found = resolved(library)
            paths.update({soname: found[soname] for soname in sonames
                          if soname not in self.cuda and soname in found})
            for soname in sonames:
                self.assertTrue(soname in self.cuda or soname.startswith("ld-linux") or
                                soname in found, f"{library}: {soname} not found here")
        package_of = owners(set(paths.values()))
        for soname, path in paths.items():
            if soname.startswith("ld-linux"):
                continue
            self.assertIn(package_of[path], BASE_IMAGE_PACKAGES, f"cuDNN links {soname}")

    def test_binaries_are_stripped_of_debug_info(self):
        for binary in self.binaries:
            sections = subprocess.run(["readelf", "-S", binary], capture_output=True, text=True,
                                      check=True).stdout
            self.assertNotIn(".debug_info", sections, binary)


if __name__ == "__main__":
    unittest.main(verbosity=2)
