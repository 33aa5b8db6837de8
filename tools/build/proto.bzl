"""C++ code from .proto files with the system protoc and grpc_cpp_plugin.

Bazel's native proto rules build protobuf from source, which needs the internet; this
macro runs the installed compiler instead. Import paths are rooted at //proto.
"""

def gpuprof_cc_proto(name, src, deps = [], grpc = False, visibility = None):
    """One cc_library for one .proto file (and its service stubs when grpc = True)."""
    base = src[:-len(".proto")]
    outs = [base + ".pb.h", base + ".pb.cc"]
    if grpc:
        outs += [base + ".grpc.pb.h", base + ".grpc.pb.cc"]
    proto_deps = [d + "_srcs" for d in deps]
    cmd = [
        "protoc",
        "--proto_path=$$(dirname $(location :%s) | sed 's|/%s$$||')" % (src, _dirname(src)),
        "--proto_path=/usr/include",
        "--cpp_out=$(GENDIR)/proto",
    ]
    if grpc:
        cmd += [
            "--grpc_out=$(GENDIR)/proto",
            "--plugin=protoc-gen-grpc=$$(command -v grpc_cpp_plugin)",
        ]
    cmd.append("$(location :%s)" % src)
    native.filegroup(
        name = name + "_srcs",
        srcs = [src] + proto_deps,
        visibility = visibility,
    )
    native.genrule(
        name = name + "_gen",
        srcs = [src] + proto_deps,
        outs = outs,
        cmd = " ".join(cmd),
    )
    native.cc_library(
        name = name,
        srcs = [o for o in outs if o.endswith(".cc")],
        hdrs = [o for o in outs if o.endswith(".h")],
        includes = ["."],
        deps = deps + ["//third_party:protobuf"] + (["//third_party:grpcpp"] if grpc else []),
        visibility = visibility,
    )

def _dirname(path):
    return path.rpartition("/")[0]
