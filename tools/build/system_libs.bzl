"""A repository of cc_library targets for libraries installed by Debian packages.

Flags come from pkg-config, so they follow whatever the installed packages declare.
"""

# target name -> pkg-config modules
_LIBRARIES = {
    "absl": [
        "absl_base",
        "absl_cleanup",
        "absl_flags",
        "absl_flags_parse",
        "absl_flat_hash_map",
        "absl_flat_hash_set",
        "absl_hash",
        "absl_random_random",
        "absl_status",
        "absl_statusor",
        "absl_str_format",
        "absl_strings",
        "absl_synchronization",
        "absl_time",
    ],
    "benchmark": ["benchmark"],
    "gmock": ["gmock"],
    "grpcpp": ["grpc++"],
    "gtest": ["gtest"],
    "gtest_main": ["gtest_main", "gmock"],
    "prometheus_cpp": ["prometheus-cpp-pull", "prometheus-cpp-core"],
    "openssl": ["openssl"],
    "protobuf": ["protobuf"],
    "sqlite3": ["sqlite3"],
    "zlib": ["zlib"],
}

def _pkg_config(ctx, flag, modules):
    result = ctx.execute(["pkg-config", flag] + modules)
    if result.return_code != 0:
        fail("pkg-config %s %s failed (is the -dev package installed? tools/setup.sh installs them): %s" %
             (flag, " ".join(modules), result.stderr))
    return result.stdout.strip().split(" ")

def _system_libs_impl(ctx):
    lines = ['package(default_visibility = ["//visibility:public"])', ""]
    for name, modules in _LIBRARIES.items():
        defines = [f[2:] for f in _pkg_config(ctx, "--cflags", modules) if f.startswith("-D")]
        linkopts = []
        for flag in _pkg_config(ctx, "--libs", modules):
            if flag and flag not in linkopts:
                linkopts.append(flag)
        lines.append("cc_library(")
        lines.append('    name = "%s",' % name)
        lines.append("    defines = %s," % repr(defines))
        lines.append("    linkopts = %s," % repr(linkopts))
        lines.append(")")
        lines.append("")
    ctx.file("WORKSPACE", 'workspace(name = "%s")\n' % ctx.name)
    ctx.file("BUILD.bazel", "\n".join(lines))

system_libs = repository_rule(
    implementation = _system_libs_impl,
    local = True,
    doc = "cc_library targets for Debian-installed libraries, flags from pkg-config.",
)
