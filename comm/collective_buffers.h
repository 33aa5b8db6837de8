// Send and receive buffers for one rank's collectives, in one of three modes:
//   DEVICE      cudaMalloc; NCCL copies through its own internal buffers.
//   REGISTERED  ncclMemAlloc + ncclCommRegister: NCCL maps the buffers into its peers, so
//               large transfers go zero-copy (NCCL >= 2.19).
//   SYMMETRIC   ncclMemAlloc + ncclCommWindowRegister(NCCL_WIN_COLL_SYMMETRIC): every rank
//               registers a same-sized window, which lets NCCL run its symmetric kernels that
//               address peers' buffers directly over NVLink/P2P (NCCL >= 2.27). This is the
//               pre-registered symmetric buffer of mini-sglang's PyNCCL wrapper. No NVLink
//               multicast is asked for (keep NCCL_NVLS_ENABLE=0).
// A mode the NCCL build or the loaded library lacks -> UNIMPLEMENTED naming the version.
//
// Registration is collective for SYMMETRIC: every rank must call Allocate with the same mode
// and size, in the same order. Destroy buffers before closing their communicator; should the
// communicator be aborted first, the registrations died with it and only the memory is freed.
#ifndef GPUPROF_COMM_COLLECTIVE_BUFFERS_H_
#define GPUPROF_COMM_COLLECTIVE_BUFFERS_H_

#include <nccl.h>

#include <cstddef>
#include <memory>
#include <span>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "comm/collective_types.h"
#include "comm/nccl_communicator.h"

namespace gpuprof::comm {

enum class BufferMode { kDevice, kRegistered, kSymmetric };

std::span<const BufferMode> AllBufferModes();
absl::string_view BufferModeName(BufferMode mode);  // "device", "registered", "symmetric"
absl::StatusOr<BufferMode> ParseBufferMode(absl::string_view name);

// OK when both the headers this was built with and `loaded_nccl_version` (ncclGetVersion)
// have the mode; UNIMPLEMENTED naming the versions otherwise.
absl::Status CheckBufferModeSupported(BufferMode mode, int loaded_nccl_version);

// What SYMMETRIC mode can run. NCCL's symmetric kernels need every rank's buffers at the same
// offset of the same window (NCCL 2.27 release notes), which in-place all_gather and
// reduce_scatter break (this rank's chunk sits at rank x chunk): INVALID_ARGUMENT. And on
// 2 x H200, NCCL 2.28.3 returned wrong all_gather and reduce_scatter data when the per-rank
// chunk was not a multiple of 16 bytes (2049 elements; docs/gpu-runs/comm-nccl.md):
// FAILED_PRECONDITION for such chunks. Both name the field to change.
absl::Status CheckSymmetricWindowUse(const CollectiveRequest& request,
                                     const CollectiveLayout& layout);

// The pointers one collective uses, resolved from buffers, layout and placement.
struct CollectivePointers {
  const void* send = nullptr;
  void* recv = nullptr;
};

class CollectiveBuffers {
 public:
  // Two buffers (send, receive) of `bytes_per_buffer` each on the communicator's device.
  static absl::StatusOr<CollectiveBuffers> Allocate(NcclCommunicator& comm, BufferMode mode,
                                                    size_t bytes_per_buffer);

  CollectiveBuffers() = default;
  CollectiveBuffers(CollectiveBuffers&& other) noexcept;
  CollectiveBuffers& operator=(CollectiveBuffers&& other) noexcept;
  CollectiveBuffers(const CollectiveBuffers&) = delete;
  CollectiveBuffers& operator=(const CollectiveBuffers&) = delete;
  ~CollectiveBuffers() { Reset(); }

  BufferMode mode() const { return mode_; }
  size_t bytes_per_buffer() const { return bytes_per_buffer_; }
  void* send() const { return send_.data; }
  void* recv() const { return recv_.data; }

  // Where `request` reads and writes: out of place, the send and receive buffers; in place,
  // offsets into the receive buffer as nccl-tests lays them out. OUT_OF_RANGE when the layout
  // does not fit; in SYMMETRIC mode, CheckSymmetricWindowUse's refusals.
  absl::StatusOr<CollectivePointers> PointersFor(const CollectiveLayout& layout,
                                                 const CollectiveRequest& request) const;

  // Deregisters and frees now.
  void Reset();

 private:
  struct Allocation {
    void* data = nullptr;
    void* registration = nullptr;   // ncclCommRegister handle
    ncclWindow_t window = nullptr;  // ncclCommWindowRegister handle
  };
  void Release(Allocation& allocation);

  std::shared_ptr<NcclCommunicator::Handle> comm_;
  int device_ = -1;
  BufferMode mode_ = BufferMode::kDevice;
  size_t bytes_per_buffer_ = 0;
  Allocation send_;
  Allocation recv_;
};

}  // namespace gpuprof::comm

#endif  // GPUPROF_COMM_COLLECTIVE_BUFFERS_H_
