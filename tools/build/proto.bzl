"""C++ code from .proto files with the system protoc and grpc_cpp_plugin.

Bazel's native proto rules build protobuf from source, which needs the internet; this
macro runs the installed compiler instead. Import paths are rooted at //proto.
"""

def gpuprof_cc_proto(name, src, deps = [], grpc = False, grpc_traits = None, visibility = None):
    """One cc_library for one .proto file (and its service stubs when grpc = True).

    grpc_traits: a header of this package, with its library, that the generated .grpc.pb.h
    includes right after the messages' header: gRPC SerializationTraits specializations for the
    service's messages must be seen before the generated code uses them.
    """
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
    extra_hdrs = []
    extra_deps = []
    if grpc_traits:
        grpc_header = "$(GENDIR)/proto/%s.grpc.pb.h" % base
        cmd.append("&& sed -i 's|^#include \"%s.pb.h\"$$|&\\n#include \"%s/%s\"|' %s" % (
            base,
            native.package_name(),
            grpc_traits["hdr"],
            grpc_header,
        ))
        cmd.append("&& grep -q '%s' %s" % (grpc_traits["hdr"], grpc_header))
        extra_hdrs.append(grpc_traits["hdr"])
        extra_deps.append(grpc_traits["dep"])
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
        hdrs = [o for o in outs if o.endswith(".h")] + extra_hdrs,
        includes = ["."],
        deps = deps + extra_deps + ["//third_party:protobuf"] +
               (["//third_party:grpcpp"] if grpc else []),
        visibility = visibility,
    )

def _dirname(path):
    return path.rpartition("/")[0]
