"""cc_fuzz_target: a libFuzzer target plus a test that replays its corpus in every build."""

load("@rules_cc//cc:defs.bzl", "cc_binary", "cc_test")

def cc_fuzz_target(name, srcs, deps = [], corpus = None, size = "small"):
    """Defines `name` (the fuzzer) and `name`_corpus_test.

    `name` defines LLVMFuzzerTestOneInput. Under --config=fuzz (clang) it links libFuzzer and
    fuzzes; otherwise it replays the files it is given. `name`_corpus_test replays the corpus
    directory (seed inputs and every crash found, kept as regressions) in the plain and ASan
    builds.
    """
    corpus = corpus or name + "_corpus"
    cc_binary(
        name = name,
        testonly = True,
        srcs = srcs,
        deps = deps + select({
            "//tools/fuzzing:libfuzzer": [],
            "//conditions:default": ["//tools/fuzzing:fuzz_replay_main"],
        }),
        linkopts = select({
            "//tools/fuzzing:libfuzzer": ["-fsanitize=fuzzer"],
            "//conditions:default": [],
        }),
        tags = ["fuzz_target"],
    )
    cc_test(
        name = name + "_corpus_test",
        size = size,
        srcs = srcs,
        deps = deps + ["//tools/fuzzing:fuzz_replay_main"],
        data = native.glob([corpus + "/**"]),
        args = [native.package_name() + "/" + corpus],
    )
