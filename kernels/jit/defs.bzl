"""Embeds a kernel family's sources in a binary for NVRTC."""

def embedded_kernel_sources(name, srcs, function):
    """A genrule writing `name`.cc, which defines gpuprof::kernels::`function`() over `srcs`."""
    native.genrule(
        name = name,
        srcs = srcs,
        outs = [name + ".cc"],
        cmd = "$(location //kernels/jit:embed_kernel_sources.sh) $@ %s $(SRCS)" % function,
        tools = ["//kernels/jit:embed_kernel_sources.sh"],
    )
