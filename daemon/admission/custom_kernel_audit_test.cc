#include "daemon/admission/custom_kernel_audit.h"

#include <gtest/gtest.h>

namespace gpuprof::daemon {
namespace {

v1::ExperimentRequest WithKernel(const std::string& file, const std::string& source) {
  v1::ExperimentRequest request;
  request.mutable_index();
  request.mutable_custom_kernel()->set_file_name(file);
  request.mutable_custom_kernel()->set_kernel_name("my_gather");
  request.mutable_custom_kernel()->set_source(source);
  return request;
}

TEST(CustomKernelAudit, NamesEachDistinctSourceByItsSha256AndSize) {
  v1::ExperimentRequest ours;
  ours.mutable_index();
  EXPECT_EQ(CustomKernelAuditDetail({ours}), "");
  // sha256("abc"), as sha256sum prints it.
  EXPECT_EQ(CustomKernelAuditDetail({WithKernel("a.cu", "abc")}),
            "; custom kernel a.cu (my_gather), source sha256 "
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad, 3 bytes");
  // A sweep: the same source at every point is named once; another source too.
  EXPECT_EQ(CustomKernelAuditDetail({WithKernel("a.cu", "abc"), WithKernel("a.cu", "abc"),
                                     WithKernel("b.cu", ""), ours}),
            "; custom kernels a.cu (my_gather), source sha256 "
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad, 3 bytes; b.cu "
            "(my_gather), source sha256 "
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855, 0 bytes");
}

}  // namespace
}  // namespace gpuprof::daemon
