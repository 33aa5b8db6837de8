// gpuprof's version, stamped at build time from the VERSION file at the repository's root.
#ifndef GPUPROF_COMMON_VERSION_H_
#define GPUPROF_COMMON_VERSION_H_



namespace gpuprof {

// "0.2.0": reported by the daemon, the workers, the CLI and in every result's provenance.
const char* GpuprofVersion();

}  // namespace gpuprof

#endif  // GPUPROF_COMMON_VERSION_H_
