"""The local CUDA toolkit as a Bazel repository, and a rule to compile .cu files with nvcc."""

_DEFAULT_CUDA_PATH = "/usr/local/cuda"

def _local_cuda_impl(ctx):
    cuda_path = ctx.os.environ.get("CUDA_PATH", _DEFAULT_CUDA_PATH)
    include = ctx.path(cuda_path + "/include")
    if not include.exists:
        fail("no CUDA toolkit at %s (set CUDA_PATH)" % cuda_path)
    ctx.symlink(include, "include")
    lib = cuda_path + "/lib64"
    rpath = "-Wl,-rpath," + lib

    # NCCL may sit beside the toolkit (lib/) or in the system's library path.
    nccl_dirs = [d for d in [cuda_path + "/lib", lib] if ctx.path(d + "/libnccl.so").exists]
    nccl_linkopts = ["-L" + d for d in nccl_dirs] + ["-lnccl"] + ["-Wl,-rpath," + d for d in nccl_dirs]
    # cuDNN's headers come with some toolkit installs; the library is loaded at run time.
    cudnn_defines = ["GPUPROF_HAVE_CUDNN"] if ctx.path(cuda_path + "/include/cudnn_graph.h").exists else []
    ctx.file("WORKSPACE", 'workspace(name = "%s")\n' % ctx.name)
    ctx.file("BUILD.bazel", """
package(default_visibility = ["//visibility:public"])

cc_library(
    name = "headers",
    hdrs = glob(["include/**/*.h", "include/**/*.hpp", "include/**/*.cuh", "include/cuda/**", "include/cub/**", "include/thrust/**", "include/nv/**"]),
    includes = ["include"],
)

cc_library(
    name = "cudart",
    linkopts = ["-L{lib}", "-lcudart_static", "-ldl", "-lrt", "-lpthread"],
    deps = [":headers"],
)

cc_library(
    name = "cuda_driver",
    # libcuda.so.1 comes with the driver; a machine without a GPU may lack it, so it is
    # loaded at run time (cudaGetDriverEntryPoint) rather than linked.
    deps = [":headers"],
)

cc_library(
    name = "cupti",
    linkopts = ["-L{lib}", "-lcupti", "{rpath}"],
    deps = [":headers"],
)

cc_library(
    name = "nvrtc",
    linkopts = ["-L{lib}", "-lnvrtc", "{rpath}"],
    deps = [":headers"],
)

cc_library(
    name = "nccl",
    linkopts = {nccl},
    deps = [":headers"],
)

cc_library(
    name = "cudnn",
    defines = {cudnn_defines},
    linkopts = ["-ldl"],
    deps = [":headers"],
)

filegroup(
    name = "nvcc",
    srcs = [],
)
""".format(lib = lib, rpath = rpath, nccl = repr(nccl_linkopts), cudnn_defines = repr(cudnn_defines)))
    ctx.file("cuda_path.bzl", 'CUDA_PATH = "%s"\n' % cuda_path)

local_cuda = repository_rule(
    implementation = _local_cuda_impl,
    local = True,
    environ = ["CUDA_PATH"],
)

# sm_80 (A100) and sm_90 (H100/H200) machine code, plus compute_90 PTX for newer GPUs.
CUDA_GENCODE = [
    "-gencode=arch=compute_80,code=sm_80",
    "-gencode=arch=compute_90,code=sm_90",
    "-gencode=arch=compute_90,code=compute_90",
]

# Hopper's architecture-specific code (wgmma, setmaxnreg): runs on compute capability 9.0 only,
# so code built with it is launched after a device check.
CUDA_GENCODE_SM90A = [
    "-gencode=arch=compute_90a,code=sm_90a",
]

# ptxas warnings as errors, spills among them: for kernels tuned to their register budget, where
# a spill is a performance regression that the CPU-only CI can catch at build time (a
# restructured Hopper prefill first spilled up to 80 bytes a thread:
# docs/gpu-runs/attention-prefill-persistent-tried-h100-h200.md).
PTXAS_NO_SPILLS = ["-Xptxas=-warn-spills,-Werror"]

# What ptxas says, as information rather than a warning, where it serialises a function's wgmmas
# (C7514 and its kin: every wgmma of the kernel waits for the one before). A branch between a
# wgmma's issue and its wait did that to the Hopper prefill, 26-30% slower and still correct
# (docs/gpu-runs/attention-prefill-unit-overlap-h200.md); `no_serialized_wgmma = True` fails
# the build on it.
_SERIALIZED_WGMMA = "wgmma.mma_async instructions are serialized"

def cuda_library(name, srcs, hdrs = [], deps = [], copts = [], gencode = CUDA_GENCODE,
                 no_serialized_wgmma = False, **kwargs):
    """Compiles each .cu in srcs with nvcc and wraps the objects in a cc_library.

    Headers of deps that the .cu files include must be listed in `hdrs` or `cu_hdrs`
    of this target so they are visible inside the genrule's sandbox. `gencode` picks the
    GPU architectures (default: CUDA_GENCODE); `copts = PTXAS_NO_SPILLS` fails the build on a
    register spill, `no_serialized_wgmma = True` where ptxas serialises a kernel's wgmmas.
    """
    cu_hdrs = kwargs.pop("cu_hdrs", [])
    objects = []
    for src in srcs:
        obj = name + "_" + src.replace("/", "_").replace(".cu", ".pic.o")
        nvcc = " ".join([
            _DEFAULT_CUDA_PATH + "/bin/nvcc",
            "-std=c++20",
            "-O3",
            "-lineinfo",
            "--expt-relaxed-constexpr",
            "-Xcompiler=-fPIC",
            "-I.",
            "-I$(GENDIR)",
        ] + gencode + copts + ["-c", "$(location %s)" % src, "-o", "$@"])
        if no_serialized_wgmma:
            # ptxas's notes (-v) go to a log; nvcc's own failure prints it whole, a serialised
            # wgmma prints its notes and fails.
            cmd = ("log=$$(mktemp); " + nvcc + " -Xptxas=-v 2>$$log; status=$$?; " +
                   "if grep -q '" + _SERIALIZED_WGMMA + "' $$log; then " +
                   "grep '" + _SERIALIZED_WGMMA + "' $$log >&2; " +
                   "echo 'ptxas serialised wgmma instructions (above): fix the kernel' >&2; " +
                   "status=1; elif [ $$status -ne 0 ]; then cat $$log >&2; fi; " +
                   "rm -f $$log; exit $$status")
        else:
            cmd = nvcc
        native.genrule(
            name = obj + "_nvcc",
            srcs = [src] + hdrs + cu_hdrs,
            outs = [obj],
            cmd = cmd,
            tags = ["cuda"],
        )
        objects.append(obj)
    native.cc_library(
        name = name,
        srcs = objects,
        hdrs = hdrs,
        deps = deps + ["@local_cuda//:cudart"],
        **kwargs
    )
