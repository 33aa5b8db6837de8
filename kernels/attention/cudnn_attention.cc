#include "kernels/attention/cudnn_attention.h"

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/cuda_raii.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"

#if defined(GPUPROF_HAVE_CUDNN)
#include <cudnn.h>
#endif

namespace gpuprof::attention {

namespace {

// The graph below is cuDNN's fp16/bf16 attention; its fp8 one takes other scaling inputs.
absl::Status CheckCudnnDtype(AttentionDtype dtype) {
  switch (dtype) {
    case AttentionDtype::kBf16:
    case AttentionDtype::kFp16:
      return absl::OkStatus();
    case AttentionDtype::kFp8E4m3:
      break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("dtype: got ", std::string(DtypeName(dtype)),
                   "; the cuDNN backend takes bf16 or fp16 (fp8 e4m3 runs in the Hopper prefill "
                   "only)"));
}

}  // namespace

#if defined(GPUPROF_HAVE_CUDNN)
// Plans timed when the heuristic offers several (each costs a few launches in Create).
constexpr int kMaxTimedPlans = 4;
#endif

std::string CudnnAttentionInfo::ToString() const {
  std::string text = absl::StrFormat(
      "cuDNN %d.%d.%d, engine %d (candidate %d of the heuristic's list", cudnn_version / 10000,
      cudnn_version / 100 % 100, cudnn_version % 100, engine_index, chosen_rank);
  if (timed_plans.size() > 1) {
    absl::StrAppend(&text, ", fastest of ", timed_plans.size(), " timed:");
    for (const TimedPlan& plan : timed_plans) {
      absl::StrAppend(&text, " engine ", plan.engine_index,
                      plan.kv_in_place ? " in place" : " paged",
                      plan.time_ms >= 0 ? absl::StrFormat(" %.1f us", plan.time_ms * 1e3)
                                        : std::string(" did not run"),
                      ";");
    }
    text.pop_back();
  }
  absl::StrAppend(&text,
                  absl::StrFormat("), %s, workspace %d B, plan built in %.1f ms%s",
                                  reads_kv_in_place ? "KV read in place (pages in order)"
                                                    : "KV through the page table",
                                  workspace_bytes, build_ms, writes_lse ? ", writes the LSE" : ""));
  return text;
}

absl::StatusOr<CudnnIndexArrays> BuildCudnnIndexArrays(const AttentionShape& shape,
                                                       const SequenceLengths& lengths,
                                                       const PagedLayout& layout) {
  const int64_t batch = lengths.batch();
  if (static_cast<int64_t>(layout.page_indptr.size()) != batch + 1) {
    return absl::InvalidArgumentError(absl::StrCat("cuDNN attention: the layout has ",
                                                   static_cast<int64_t>(layout.page_indptr.size()) - 1,
                                                   " page tables for ", batch, " sequences"));
  }
  CudnnIndexArrays arrays;
  arrays.q_offsets.resize(batch + 1);
  arrays.lse_offsets.resize(batch + 1);
  int64_t first_row = 0;
  for (int64_t i = 0; i <= batch; ++i) {
    if (first_row * shape.num_qo_heads * shape.head_dim > std::numeric_limits<int32_t>::max()) {
      return absl::InvalidArgumentError(
          "cuDNN attention: more than 2^31 query elements (its ragged offsets are 32-bit)");
    }
    arrays.q_offsets[i] = static_cast<int32_t>(first_row * shape.num_qo_heads * shape.head_dim);
    arrays.lse_offsets[i] = static_cast<int32_t>(first_row * shape.num_qo_heads);
    if (i < batch) first_row += lengths.q_lens[i];
  }
  arrays.max_pages = 1;
  for (int64_t i = 0; i < batch; ++i) {
    arrays.max_pages = std::max<int64_t>(arrays.max_pages,
                                         layout.page_indptr[i + 1] - layout.page_indptr[i]);
  }
  arrays.page_table.assign(batch * arrays.max_pages, 0);
  for (int64_t i = 0; i < batch; ++i) {
    for (int32_t p = layout.page_indptr[i]; p < layout.page_indptr[i + 1]; ++p) {
      arrays.page_table[i * arrays.max_pages + (p - layout.page_indptr[i])] =
          layout.page_indices[p];
    }
  }
  // KV offsets, when each sequence's pages are consecutive and the sequences in order.
  const int64_t row_elements = int64_t{shape.num_kv_heads} * shape.head_dim;
  std::vector<int32_t> kv_offsets(batch + 1);
  int64_t next_row = batch > 0 && layout.page_indptr[1] > layout.page_indptr[0]
                         ? int64_t{layout.page_indices[layout.page_indptr[0]]} * shape.page_size
                         : 0;
  for (int64_t i = 0; i <= batch; ++i) {
    int64_t first = next_row;
    if (i < batch && layout.page_indptr[i + 1] > layout.page_indptr[i]) {
      const int32_t first_page = layout.page_indices[layout.page_indptr[i]];
      for (int32_t p = layout.page_indptr[i]; p < layout.page_indptr[i + 1]; ++p) {
        if (layout.page_indices[p] != first_page + (p - layout.page_indptr[i])) return arrays;
      }
      first = int64_t{first_page} * shape.page_size;
      if (first < next_row) return arrays;  // out of order
      next_row = first + int64_t{layout.page_indptr[i + 1] - layout.page_indptr[i]} * shape.page_size;
    }
    if (first * row_elements > std::numeric_limits<int32_t>::max()) return arrays;
    kv_offsets[i] = static_cast<int32_t>(first * row_elements);
  }
  arrays.kv_offsets = std::move(kv_offsets);
  return arrays;
}

#if defined(GPUPROF_HAVE_CUDNN)

namespace {

// The cuDNN entry points this file uses, resolved once from libcudnn.so.9.
struct CudnnApi {
  decltype(&cudnnGetVersion) GetVersion = nullptr;
  decltype(&cudnnGetErrorString) GetErrorString = nullptr;
  decltype(&cudnnGetLastErrorString) GetLastErrorString = nullptr;
  decltype(&cudnnCreate) Create = nullptr;
  decltype(&cudnnDestroy) Destroy = nullptr;
  decltype(&cudnnSetStream) SetStream = nullptr;
  decltype(&cudnnBackendCreateDescriptor) CreateDescriptor = nullptr;
  decltype(&cudnnBackendDestroyDescriptor) DestroyDescriptor = nullptr;
  decltype(&cudnnBackendSetAttribute) SetAttribute = nullptr;
  decltype(&cudnnBackendGetAttribute) GetAttribute = nullptr;
  decltype(&cudnnBackendFinalize) Finalize = nullptr;
  decltype(&cudnnBackendExecute) Execute = nullptr;
};

absl::StatusOr<const CudnnApi*> LoadCudnn() {
  static const absl::StatusOr<CudnnApi> api = []() -> absl::StatusOr<CudnnApi> {
    // The system's library path first (where cuDNN's packages put it), then the toolkit's
    // own lib folders, where some CUDA installs keep it.
    void* library = nullptr;
    std::string tried;
    const char* cuda_path = std::getenv("CUDA_PATH");
    for (const std::string& path :
         {std::string("libcudnn.so.9"),
          absl::StrCat(cuda_path != nullptr ? cuda_path : "/usr/local/cuda", "/lib/libcudnn.so.9"),
          absl::StrCat(cuda_path != nullptr ? cuda_path : "/usr/local/cuda", "/lib64/libcudnn.so.9")}) {
      library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (library != nullptr) break;
      absl::StrAppend(&tried, tried.empty() ? "" : "; ", dlerror());
    }
    if (library == nullptr) {
      return absl::UnavailableError(
          absl::StrCat("cuDNN 9 is not installed on this machine (", tried, ")"));
    }
    CudnnApi loaded;
    bool missing = false;
    std::string missing_name;
    auto resolve = [&](auto& function, const char* name) {
      function = reinterpret_cast<std::remove_reference_t<decltype(function)>>(dlsym(library, name));
      if (function == nullptr && !missing) {
        missing = true;
        missing_name = name;
      }
    };
    resolve(loaded.GetVersion, "cudnnGetVersion");
    resolve(loaded.GetErrorString, "cudnnGetErrorString");
    resolve(loaded.GetLastErrorString, "cudnnGetLastErrorString");
    resolve(loaded.Create, "cudnnCreate");
    resolve(loaded.Destroy, "cudnnDestroy");
    resolve(loaded.SetStream, "cudnnSetStream");
    resolve(loaded.CreateDescriptor, "cudnnBackendCreateDescriptor");
    resolve(loaded.DestroyDescriptor, "cudnnBackendDestroyDescriptor");
    resolve(loaded.SetAttribute, "cudnnBackendSetAttribute");
    resolve(loaded.GetAttribute, "cudnnBackendGetAttribute");
    resolve(loaded.Finalize, "cudnnBackendFinalize");
    resolve(loaded.Execute, "cudnnBackendExecute");
    if (missing) {
      return absl::UnavailableError(
          absl::StrCat("the installed cuDNN lacks ", missing_name, " (cuDNN 9 is needed)"));
    }
    if (loaded.GetVersion() < 90000) {
      return absl::UnavailableError(
          absl::StrCat("cuDNN ", loaded.GetVersion(), " is installed; 9.0 or newer is needed"));
    }
    return loaded;
  }();
  if (!api.ok()) return api.status();
  return &*api;
}

// A cuDNN status as an absl::Status: cuDNN's name for it and its last error message, which
// says what in the graph it did not accept.
absl::Status CudnnError(const CudnnApi& api, cudnnStatus_t status, absl::string_view what) {
  if (status == CUDNN_STATUS_SUCCESS) return absl::OkStatus();
  char message[1024] = {0};
  api.GetLastErrorString(message, sizeof(message));
  const std::string text = absl::StrCat("cuDNN: ", what, ": ", api.GetErrorString(status),
                                        message[0] != 0 ? absl::StrCat(" (", message, ")") : "");
  // cuDNN numbers its statuses in families: 2xxx bad parameters, 3xxx not supported.
  if (status >= CUDNN_STATUS_NOT_SUPPORTED && status < CUDNN_STATUS_INTERNAL_ERROR) {
    return absl::UnimplementedError(text);
  }
  if (status >= CUDNN_STATUS_BAD_PARAM && status < CUDNN_STATUS_NOT_SUPPORTED) {
    return absl::InvalidArgumentError(text);
  }
  return absl::InternalError(text);
}

// Owns one backend descriptor.
class Descriptor {
 public:
  Descriptor(const CudnnApi& api, cudnnBackendDescriptor_t descriptor)
      : api_(&api), descriptor_(descriptor) {}
  Descriptor(Descriptor&& other) noexcept
      : api_(other.api_), descriptor_(std::exchange(other.descriptor_, nullptr)) {}
  Descriptor& operator=(Descriptor&& other) noexcept {
    if (this != &other) {
      Reset();
      api_ = other.api_;
      descriptor_ = std::exchange(other.descriptor_, nullptr);
    }
    return *this;
  }
  Descriptor(const Descriptor&) = delete;
  ~Descriptor() { Reset(); }
  cudnnBackendDescriptor_t get() const { return descriptor_; }

 private:
  void Reset() {
    if (descriptor_ != nullptr) api_->DestroyDescriptor(std::exchange(descriptor_, nullptr));
  }

  const CudnnApi* api_;
  cudnnBackendDescriptor_t descriptor_;
};

// Creates a backend descriptor that `owned` keeps alive.
absl::StatusOr<cudnnBackendDescriptor_t> CreateOwned(const CudnnApi& api,
                                                     cudnnBackendDescriptorType_t type,
                                                     absl::string_view what,
                                                     std::vector<Descriptor>& owned) {
  cudnnBackendDescriptor_t descriptor = nullptr;
  RETURN_IF_ERROR(CudnnError(api, api.CreateDescriptor(type, &descriptor), what));
  owned.emplace_back(api, descriptor);
  return descriptor;
}

// Owns a cuDNN handle (bound to the device current at creation).
class Handle {
 public:
  explicit Handle(const CudnnApi& api) : api_(&api) {}
  Handle(Handle&& other) noexcept : api_(other.api_), handle_(std::exchange(other.handle_, nullptr)) {}
  Handle& operator=(Handle&&) = delete;
  ~Handle() {
    if (handle_ != nullptr) api_->Destroy(handle_);
  }
  absl::Status Create() { return CudnnError(*api_, api_->Create(&handle_), "creating a handle"); }
  cudnnHandle_t get() const { return handle_; }

 private:
  const CudnnApi* api_;
  cudnnHandle_t handle_ = nullptr;
};

using Dims = std::array<int64_t, 4>;

// Tensor ids of the variant pack; virtual tensors take ids from kFirstVirtual on.
enum Uid : int64_t {
  kQ = 1,
  kKCache,
  kVCache,
  kO,
  kLse,
  kSeqLenQ,
  kSeqLenKv,
  kQRaggedOffset,
  kLseRaggedOffset,
  kPageTable,
  kScale,
  kKRaggedOffset,
  kVRaggedOffset,
  kNegativeInfinity,
  kFirstVirtual = 100,
};

// Builds a backend graph, one descriptor at a time; keeps every descriptor alive and records
// the first failure, so that a long chain of calls is checked once at the end.
class GraphBuilder {
 public:
  explicit GraphBuilder(const CudnnApi& api) : api_(api) {}

  const absl::Status& status() const { return status_; }

  cudnnBackendDescriptor_t Create(cudnnBackendDescriptorType_t type, absl::string_view what) {
    absl::StatusOr<cudnnBackendDescriptor_t> descriptor = CreateOwned(api_, type, what, owned_);
    if (!descriptor.ok()) {
      if (status_.ok()) status_ = descriptor.status();
      return nullptr;
    }
    return *descriptor;
  }

  void Set(cudnnBackendDescriptor_t descriptor, cudnnBackendAttributeName_t name,
           cudnnBackendAttributeType_t type, int64_t count, const void* values,
           absl::string_view what) {
    if (!status_.ok() || descriptor == nullptr) return;
    Check(api_.SetAttribute(descriptor, name, type, count, values), what);
  }
  void SetDescriptor(cudnnBackendDescriptor_t descriptor, cudnnBackendAttributeName_t name,
                     cudnnBackendDescriptor_t value, absl::string_view what) {
    Set(descriptor, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &value, what);
  }
  void SetInt(cudnnBackendDescriptor_t descriptor, cudnnBackendAttributeName_t name, int64_t value,
              absl::string_view what) {
    Set(descriptor, name, CUDNN_TYPE_INT64, 1, &value, what);
  }
  void SetDataType(cudnnBackendDescriptor_t descriptor, cudnnBackendAttributeName_t name,
                   cudnnDataType_t value, absl::string_view what) {
    Set(descriptor, name, CUDNN_TYPE_DATA_TYPE, 1, &value, what);
  }
  void Finalize(cudnnBackendDescriptor_t descriptor, absl::string_view what) {
    if (!status_.ok() || descriptor == nullptr) return;
    Check(api_.Finalize(descriptor), what);
  }

  // A tensor [d0, d1, d2, d3] with `strides`; virtual tensors live only inside the fused
  // kernel, by-value ones are host scalars handed over in the variant pack.
  cudnnBackendDescriptor_t Tensor(int64_t uid, cudnnDataType_t type, Dims dims, Dims strides,
                                  bool is_virtual, bool by_value = false,
                                  cudnnBackendDescriptor_t ragged_offset = nullptr) {
    const std::string what = absl::StrCat("tensor ", uid);
    cudnnBackendDescriptor_t tensor = Create(CUDNN_BACKEND_TENSOR_DESCRIPTOR, what);
    SetInt(tensor, CUDNN_ATTR_TENSOR_UNIQUE_ID, uid, what);
    SetDataType(tensor, CUDNN_ATTR_TENSOR_DATA_TYPE, type, what);
    Set(tensor, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims.data(), what);
    Set(tensor, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.data(), what);
    SetInt(tensor, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, 16, what);
    const bool virtual_flag = is_virtual;
    Set(tensor, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &virtual_flag, what);
    if (by_value) {
      const bool by_value_flag = true;
      Set(tensor, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value_flag, what);
    }
    if (ragged_offset != nullptr) {
      SetDescriptor(tensor, CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC, ragged_offset, what);
    }
    Finalize(tensor, what);
    return tensor;
  }

  // A virtual tensor with the next free id.
  cudnnBackendDescriptor_t Virtual(cudnnDataType_t type, Dims dims, Dims strides) {
    return Tensor(next_virtual_++, type, dims, strides, /*is_virtual=*/true);
  }

  // y = op(x[, b[, t]]); `axis` >= 0 for the index and broadcasting operations that take one.
  void Pointwise(cudnnPointwiseMode_t mode, cudnnDataType_t math, cudnnBackendDescriptor_t x,
                 cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t t,
                 cudnnBackendDescriptor_t y, int64_t axis = -1) {
    const std::string what = absl::StrCat("pointwise ", static_cast<int>(mode));
    cudnnBackendDescriptor_t pw = Create(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, what);
    Set(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, what);
    SetDataType(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, math, what);
    if (axis >= 0) SetInt(pw, CUDNN_ATTR_POINTWISE_AXIS, axis, what);
    Finalize(pw, what);
    cudnnBackendDescriptor_t op = Create(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, what);
    SetDescriptor(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw, what);
    SetDescriptor(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x, what);
    if (b != nullptr) SetDescriptor(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b, what);
    if (t != nullptr) SetDescriptor(op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, t, what);
    SetDescriptor(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y, what);
    Finalize(op, what);
    operations_.push_back(op);
  }

  void Reduction(cudnnReduceTensorOp_t mode, cudnnBackendDescriptor_t x,
                 cudnnBackendDescriptor_t y) {
    const std::string what = absl::StrCat("reduction ", static_cast<int>(mode));
    cudnnBackendDescriptor_t reduction = Create(CUDNN_BACKEND_REDUCTION_DESCRIPTOR, what);
    Set(reduction, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode, what);
    SetDataType(reduction, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_DATA_FLOAT, what);
    Finalize(reduction, what);
    cudnnBackendDescriptor_t op = Create(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, what);
    SetDescriptor(op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, reduction, what);
    SetDescriptor(op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x, what);
    SetDescriptor(op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y, what);
    Finalize(op, what);
    operations_.push_back(op);
  }

  // c = a . b, batched over the first two dimensions; the overrides are per-sequence lengths
  // that bound the rows (m), columns (n) or reduction (k) actually used.
  void Matmul(cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t c,
              cudnnBackendDescriptor_t m_override, cudnnBackendDescriptor_t n_override,
              cudnnBackendDescriptor_t k_override, absl::string_view what) {
    cudnnBackendDescriptor_t matmul = Create(CUDNN_BACKEND_MATMUL_DESCRIPTOR, what);
    SetDataType(matmul, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_DATA_FLOAT, what);
    Finalize(matmul, what);
    cudnnBackendDescriptor_t op = Create(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, what);
    SetDescriptor(op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, a, what);
    SetDescriptor(op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, b, what);
    SetDescriptor(op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, c, what);
    SetDescriptor(op, CUDNN_ATTR_OPERATION_MATMUL_DESC, matmul, what);
    if (m_override != nullptr) {
      SetDescriptor(op, CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC, m_override, what);
    }
    if (n_override != nullptr) {
      SetDescriptor(op, CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC, n_override, what);
    }
    if (k_override != nullptr) {
      SetDescriptor(op, CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC, k_override, what);
    }
    Finalize(op, what);
    operations_.push_back(op);
  }

  // y = the rows of `container` that the page table and lengths select, as one dense tensor.
  void PagedCacheLoad(cudnnBackendDescriptor_t container, cudnnBackendDescriptor_t page_table,
                      cudnnBackendDescriptor_t lengths, cudnnBackendDescriptor_t y,
                      absl::string_view what) {
    cudnnBackendDescriptor_t op = Create(CUDNN_BACKEND_OPERATION_PAGED_CACHE_LOAD_DESCRIPTOR, what);
    SetDescriptor(op, CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_CONTAINER_DESC, container, what);
    SetDescriptor(op, CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_PAGE_TABLE_DESC, page_table, what);
    SetDescriptor(op, CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_SEQUENCE_DESC, lengths, what);
    SetDescriptor(op, CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_YDESC, y, what);
    Finalize(op, what);
    operations_.push_back(op);
  }

  const std::vector<cudnnBackendDescriptor_t>& operations() const { return operations_; }
  std::vector<Descriptor> TakeOwned() { return std::move(owned_); }

 private:
  void Check(cudnnStatus_t status, absl::string_view what) {
    if (status_.ok()) status_ = CudnnError(api_, status, what);
  }

  const CudnnApi& api_;
  absl::Status status_;
  std::vector<Descriptor> owned_;
  std::vector<cudnnBackendDescriptor_t> operations_;
  int64_t next_virtual_ = kFirstVirtual;
};

// Q, K, V and O's type; fp8 is refused before a graph is built (CheckCudnnDtype).
cudnnDataType_t CudnnType(AttentionDtype dtype) {
  switch (dtype) {
    case AttentionDtype::kBf16:
      return CUDNN_DATA_BFLOAT16;
    case AttentionDtype::kFp16:
      return CUDNN_DATA_HALF;
    case AttentionDtype::kFp8E4m3:
      return CUDNN_DATA_FP8_E4M3;
  }
  return CUDNN_DATA_HALF;
}

template <typename T>
absl::StatusOr<DeviceBuffer> UploadVector(const std::vector<T>& host) {
  ASSIGN_OR_RETURN(DeviceBuffer buffer, DeviceBuffer::Allocate(std::max<size_t>(host.size(), 1) * sizeof(T)));
  CUDA_RETURN_IF_ERROR(
      cudaMemcpy(buffer.data(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  return buffer;
}

// The sizes the graph is built for: batch, heads, the longest sequences and the cache.
struct GraphSizes {
  int64_t b = 0, hq = 0, hk = 0, d = 0, page = 0, sq = 0, skv = 0, num_pages = 0, max_pages = 0;
  bool with_lse = false;
  // Sequences with different query lengths need ragged offsets into Q, O and the LSE; equal
  // ones are a dense [b, sq, heads, d] tensor, which more of cuDNN's engines take.
  bool ragged = false;

  GraphSizes(const AttentionShape& shape, const SequenceLengths& lengths, int64_t cache_pages,
             bool lse)
      : b(lengths.batch()),
        hq(shape.num_qo_heads),
        hk(shape.num_kv_heads),
        d(shape.head_dim),
        page(shape.page_size),
        sq(std::max<int32_t>(lengths.max_q_len(), 1)),
        skv(std::max<int32_t>(lengths.max_kv_len(), 1)),
        num_pages(std::max<int64_t>(cache_pages, 1)),
        max_pages(1),
        with_lse(lse) {
    for (int32_t pages : lengths.num_pages) max_pages = std::max<int64_t>(max_pages, pages);
    for (int32_t q_len : lengths.q_lens) ragged = ragged || q_len != lengths.q_lens.front();
  }

  // Every sequence's KV rows lie in consecutive pages, sequences in order: K and V are read
  // as dense [rows, kv_heads, d] tensors (with a ragged offset per sequence when
  // kv_ragged) instead of through the page table.
  bool contiguous_kv = false;
  bool kv_ragged = false;
};

// Adds the attention graph's tensors and operations to `g` (see the header for its shape).
void AddAttentionGraph(GraphBuilder& g, const AttentionShape& shape, const GraphSizes& z) {
  const int64_t b = z.b, hq = z.hq, hk = z.hk, d = z.d, page = z.page, sq = z.sq, skv = z.skv;
  const int64_t num_pages = z.num_pages, max_pages = z.max_pages;
  const bool with_lse = z.with_lse;
  const cudnnDataType_t io = CudnnType(shape.dtype);
  const Dims scalar_dims = {1, 1, 1, 1};
  const Dims lengths_dims = {b, 1, 1, 1};
  const Dims unit = {1, 1, 1, 1};

  // Inputs and outputs. Q and O are [total_q, heads, d] rows: as [b, heads, sq, d] with a
  // ragged offset per sequence. The caches are [pages, page_size, kv_heads, d]: as
  // [pages, kv_heads, page_size, d] containers that the page table indexes (or, with
  // contiguous_kv, as [b, kv_heads, skv, d] from each sequence's first row).
  auto* q_offset =
      z.ragged ? g.Tensor(kQRaggedOffset, CUDNN_DATA_INT32, {b + 1, 1, 1, 1}, unit, false) : nullptr;
  auto* q = g.Tensor(kQ, io, {b, hq, sq, d}, {sq * hq * d, d, hq * d, 1}, false, false, q_offset);
  auto* o = g.Tensor(kO, io, {b, hq, sq, d}, {sq * hq * d, d, hq * d, 1}, false, false, q_offset);
  auto* seq_q = g.Tensor(kSeqLenQ, CUDNN_DATA_INT32, lengths_dims, unit, false);
  auto* seq_kv = g.Tensor(kSeqLenKv, CUDNN_DATA_INT32, lengths_dims, unit, false);
  auto* scale = g.Tensor(kScale, CUDNN_DATA_FLOAT, scalar_dims, unit, false, /*by_value=*/true);
  auto* minus_inf =
      g.Tensor(kNegativeInfinity, CUDNN_DATA_FLOAT, scalar_dims, unit, false, /*by_value=*/true);

  // K^T [b, kv_heads, d, skv] and V [b, kv_heads, skv, d]: gathered through the page table,
  // or read in place when every sequence's pages are consecutive.
  cudnnBackendDescriptor_t k_t = nullptr, v = nullptr;
  if (z.contiguous_kv) {
    auto ragged_offset = [&](int64_t uid) {
      return z.kv_ragged ? g.Tensor(uid, CUDNN_DATA_INT32, {b + 1, 1, 1, 1}, unit, false)
                         : nullptr;
    };
    k_t = g.Tensor(kKCache, io, {b, hk, d, skv}, {skv * hk * d, d, 1, hk * d}, false, false,
                   ragged_offset(kKRaggedOffset));
    v = g.Tensor(kVCache, io, {b, hk, skv, d}, {skv * hk * d, d, hk * d, 1}, false, false,
                 ragged_offset(kVRaggedOffset));
  } else {
    const Dims container_dims = {num_pages, hk, page, d};
    const Dims container_strides = {page * hk * d, d, hk * d, 1};
    auto* k_cache = g.Tensor(kKCache, io, container_dims, container_strides, false);
    auto* v_cache = g.Tensor(kVCache, io, container_dims, container_strides, false);
    auto* table = g.Tensor(kPageTable, CUDNN_DATA_INT32, {b, 1, max_pages, 1},
                           {max_pages, max_pages, 1, 1}, false);
    k_t = g.Virtual(io, {b, hk, d, skv}, {hk * d * skv, d * skv, 1, d});
    g.PagedCacheLoad(k_cache, table, seq_kv, k_t, "loading K through the page table");
    v = g.Virtual(io, {b, hk, skv, d}, {hk * skv * d, skv * d, d, 1});
    g.PagedCacheLoad(v_cache, table, seq_kv, v, "loading V through the page table");
  }

  // S = scale * Q K^T, [b, heads, sq, skv] in fp32.
  const Dims s_dims = {b, hq, sq, skv};
  const Dims s_strides = {hq * sq * skv, sq * skv, skv, 1};
  auto* s = g.Virtual(CUDNN_DATA_FLOAT, s_dims, s_strides);
  // The per-sequence bounds and the padding mask stay even when every sequence has the same
  // lengths: cuDNN 9.14 offers no engine for a paged graph without them (seen on an H100).
  g.Matmul(q, k_t, s, seq_q, seq_kv, nullptr, "Q K^T");
  // One pointwise operation over the scores' shape, its output a new virtual tensor.
  auto scores_op = [&](cudnnPointwiseMode_t mode, cudnnDataType_t math, cudnnDataType_t out,
                       cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b_input = nullptr,
                       cudnnBackendDescriptor_t t_input = nullptr, int64_t axis = -1) {
    auto* y = g.Virtual(out, s_dims, s_strides);
    g.Pointwise(mode, math, x, b_input, t_input, y, axis);
    return y;
  };
  constexpr cudnnDataType_t kF32 = CUDNN_DATA_FLOAT, kI32 = CUDNN_DATA_INT32,
                            kBool = CUDNN_DATA_BOOLEAN;
  auto* scaled = scores_op(CUDNN_POINTWISE_MUL, kF32, kF32, s, scale);

  // Padding mask: row < seq_len_q and column < seq_len_kv.
  auto* row = scores_op(CUDNN_POINTWISE_GEN_INDEX, kI32, kI32, scaled, nullptr, nullptr, 2);
  auto* column = scores_op(CUDNN_POINTWISE_GEN_INDEX, kI32, kI32, scaled, nullptr, nullptr, 3);
  auto* inside = scores_op(CUDNN_POINTWISE_LOGICAL_AND, kBool, kBool,
                           scores_op(CUDNN_POINTWISE_CMP_LT, kBool, kBool, row, seq_q),
                           scores_op(CUDNN_POINTWISE_CMP_LT, kBool, kBool, column, seq_kv));
  auto* masked = scores_op(CUDNN_POINTWISE_BINARY_SELECT, kF32, kF32, scaled, minus_inf, inside);

  // Causal, aligned bottom-right as our kernels are: keep column <= row + kv_len - q_len.
  if (shape.causal) {
    auto* causal_row = scores_op(CUDNN_POINTWISE_GEN_INDEX, kF32, kI32, masked, nullptr, nullptr, 2);
    auto* causal_column =
        scores_op(CUDNN_POINTWISE_GEN_INDEX, kF32, kI32, masked, nullptr, nullptr, 3);
    auto* shifted = scores_op(CUDNN_POINTWISE_ADD, kI32, kI32, causal_row, seq_kv, nullptr, 3);
    auto* diagonal = scores_op(CUDNN_POINTWISE_SUB, kI32, kI32, shifted, seq_q, nullptr, 3);
    auto* keep = scores_op(CUDNN_POINTWISE_CMP_GE, kBool, kBool, diagonal, causal_column);
    masked = scores_op(CUDNN_POINTWISE_BINARY_SELECT, kF32, kF32, masked, minus_inf, keep);
  }

  // Softmax over the last axis: max, exp(S - max), sum, P = exp / sum; LSE = max + log(sum).
  const Dims row_dims = {b, hq, sq, 1};
  const Dims row_strides = {hq * sq, sq, 1, 1};
  auto* row_max = g.Virtual(CUDNN_DATA_FLOAT, row_dims, row_strides);
  g.Reduction(CUDNN_REDUCE_TENSOR_MAX, masked, row_max);
  auto* centred = g.Virtual(CUDNN_DATA_FLOAT, s_dims, s_strides);
  g.Pointwise(CUDNN_POINTWISE_SUB, CUDNN_DATA_FLOAT, masked, row_max, nullptr, centred);
  auto* exponent = g.Virtual(CUDNN_DATA_FLOAT, s_dims, s_strides);
  g.Pointwise(CUDNN_POINTWISE_EXP, CUDNN_DATA_FLOAT, centred, nullptr, nullptr, exponent);
  auto* row_sum = g.Virtual(CUDNN_DATA_FLOAT, row_dims, row_strides);
  g.Reduction(CUDNN_REDUCE_TENSOR_ADD, exponent, row_sum);
  if (with_lse) {
    // LSE rows are [total_q, heads] fp32, as ragged [b, heads, sq, 1].
    auto* lse_offset =
        z.ragged ? g.Tensor(kLseRaggedOffset, CUDNN_DATA_INT32, {b + 1, 1, 1, 1}, unit, false)
                 : nullptr;
    auto* log_sum = g.Virtual(CUDNN_DATA_FLOAT, row_dims, row_strides);
    g.Pointwise(CUDNN_POINTWISE_LOG, CUDNN_DATA_FLOAT, row_sum, nullptr, nullptr, log_sum);
    auto* lse = g.Tensor(kLse, CUDNN_DATA_FLOAT, row_dims, {sq * hq, 1, hq, 1}, false, false,
                         lse_offset);
    g.Pointwise(CUDNN_POINTWISE_ADD, CUDNN_DATA_FLOAT, row_max, log_sum, nullptr, lse);
  }
  // P in the input type: the second product runs on the tensor cores as the first does.
  auto* p = g.Virtual(io, s_dims, s_strides);
  g.Pointwise(CUDNN_POINTWISE_DIV, CUDNN_DATA_FLOAT, exponent, row_sum, nullptr, p);
  g.Matmul(p, v, o, seq_q, nullptr, seq_kv, "P V");
}

// The operation graph over `g`'s operations, finalized; `handle` may be null when only the
// graph is checked (cuDNN validates every operation and tensor without a GPU).
absl::StatusOr<cudnnBackendDescriptor_t> FinalizeOperationGraph(const CudnnApi& api,
                                                                const GraphBuilder& g,
                                                                cudnnHandle_t handle,
                                                                std::vector<Descriptor>& owned) {
  ASSIGN_OR_RETURN(cudnnBackendDescriptor_t graph,
                   CreateOwned(api, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "operation graph",
                               owned));
  if (handle != nullptr) {
    RETURN_IF_ERROR(CudnnError(api,
                               api.SetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE,
                                                CUDNN_TYPE_HANDLE, 1, &handle),
                               "operation graph handle"));
  }
  const std::vector<cudnnBackendDescriptor_t>& operations = g.operations();
  RETURN_IF_ERROR(CudnnError(
      api,
      api.SetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                       static_cast<int64_t>(operations.size()), operations.data()),
      "operation graph operations"));
  RETURN_IF_ERROR(CudnnError(api, api.Finalize(graph), "finalizing the operation graph"));
  return graph;
}

// One execution plan cuDNN built for the graph.
struct PlanCandidate {
  cudnnBackendDescriptor_t plan = nullptr;
  int rank = 0;                // 1-based position in the heuristic's ranked list
  int64_t engine_index = -1;   // cuDNN's global engine index; -1 when cuDNN does not say
  int64_t workspace_bytes = 0;
  float time_ms = -1;          // per launch, when timed
};

// The plan's engine index and workspace, read back from cuDNN.
absl::Status DescribePlan(const CudnnApi& api, std::vector<Descriptor>& owned,
                          PlanCandidate& candidate) {
  int64_t count = 0;
  RETURN_IF_ERROR(CudnnError(api,
                             api.GetAttribute(candidate.plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                              CUDNN_TYPE_INT64, 1, &count,
                                              &candidate.workspace_bytes),
                             "plan workspace size"));
  ASSIGN_OR_RETURN(cudnnBackendDescriptor_t config,
                   CreateOwned(api, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "engine config", owned));
  ASSIGN_OR_RETURN(cudnnBackendDescriptor_t engine,
                   CreateOwned(api, CUDNN_BACKEND_ENGINE_DESCRIPTOR, "engine", owned));
  // The index is for the record only: a cuDNN that does not say leaves -1.
  if (api.GetAttribute(candidate.plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                       CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count, &config) == CUDNN_STATUS_SUCCESS &&
      api.GetAttribute(config, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                       &count, &engine) == CUDNN_STATUS_SUCCESS) {
    api.GetAttribute(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &count,
                     &candidate.engine_index);
  }
  return absl::OkStatus();
}

// Plans for the first `max_plans` of the heuristic's ranked engine configurations that cuDNN
// can build on the GPU behind `handle` (the fallback list when the ranked one yields none);
// `tried` counts the candidates.
absl::StatusOr<std::vector<PlanCandidate>> BuildPlans(const CudnnApi& api,
                                                      cudnnBackendDescriptor_t graph,
                                                      cudnnHandle_t handle, int max_plans,
                                                      std::vector<Descriptor>& owned, int& tried) {
  absl::Status last_failure = absl::UnimplementedError("cuDNN offered no engine for this graph");
  std::vector<PlanCandidate> plans;
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    ASSIGN_OR_RETURN(cudnnBackendDescriptor_t heuristic,
                     CreateOwned(api, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, "engine heuristic", owned));
    RETURN_IF_ERROR(CudnnError(api,
                               api.SetAttribute(heuristic, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH,
                                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph),
                               "heuristic graph"));
    RETURN_IF_ERROR(CudnnError(api,
                               api.SetAttribute(heuristic, CUDNN_ATTR_ENGINEHEUR_MODE,
                                                 CUDNN_TYPE_HEUR_MODE, 1, &mode),
                               "heuristic mode"));
    const cudnnStatus_t finalized = api.Finalize(heuristic);
    if (finalized != CUDNN_STATUS_SUCCESS) {
      last_failure = CudnnError(api, finalized, "running the engine heuristic");
      continue;
    }
    int64_t count = 0;
    RETURN_IF_ERROR(CudnnError(api,
                               api.GetAttribute(heuristic, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr),
                               "counting the heuristic's results"));
    std::vector<cudnnBackendDescriptor_t> configs(count);
    for (auto& config : configs) {
      ASSIGN_OR_RETURN(config,
                       CreateOwned(api, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "engine config", owned));
    }
    int64_t returned = 0;
    RETURN_IF_ERROR(CudnnError(api,
                               api.GetAttribute(heuristic, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &returned,
                                                 configs.data()),
                               "reading the heuristic's results"));
    for (int64_t i = 0; i < returned && static_cast<int>(plans.size()) < max_plans; ++i) {
      ++tried;
      ASSIGN_OR_RETURN(cudnnBackendDescriptor_t candidate,
                       CreateOwned(api, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, "execution plan",
                                   owned));
      RETURN_IF_ERROR(CudnnError(api,
                                 api.SetAttribute(candidate, CUDNN_ATTR_EXECUTION_PLAN_HANDLE,
                                                  CUDNN_TYPE_HANDLE, 1, &handle),
                                 "plan handle"));
      RETURN_IF_ERROR(CudnnError(api,
                                 api.SetAttribute(candidate, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &configs[i]),
                                 "plan engine config"));
      const cudnnStatus_t built = api.Finalize(candidate);
      if (built != CUDNN_STATUS_SUCCESS) {
        last_failure =
            CudnnError(api, built, absl::StrCat("building a plan from candidate ", i + 1));
        continue;
      }
      PlanCandidate plan{.plan = candidate, .rank = static_cast<int>(i + 1)};
      RETURN_IF_ERROR(DescribePlan(api, owned, plan));
      plans.push_back(plan);
    }
    if (!plans.empty()) break;
  }
  if (plans.empty()) {
    return absl::Status(
        last_failure.code(),
        absl::StrCat("cuDNN has no engine for this attention graph after ", tried,
                     " candidate(s); the last refusal: ", last_failure.message()));
  }
  return plans;
}

// A finalized variant pack: the tensors' ids, where they live, and the workspace.
absl::StatusOr<cudnnBackendDescriptor_t> BuildVariantPack(const CudnnApi& api,
                                                          const std::vector<int64_t>& uids,
                                                          const std::vector<void*>& pointers,
                                                          void* workspace,
                                                          std::vector<Descriptor>& owned) {
  ASSIGN_OR_RETURN(cudnnBackendDescriptor_t pack,
                   CreateOwned(api, CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, "variant pack", owned));
  RETURN_IF_ERROR(CudnnError(api,
                             api.SetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS,
                                              CUDNN_TYPE_INT64, static_cast<int64_t>(uids.size()),
                                              uids.data()),
                             "variant pack ids"));
  RETURN_IF_ERROR(CudnnError(api,
                             api.SetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS,
                                              CUDNN_TYPE_VOID_PTR,
                                              static_cast<int64_t>(pointers.size()),
                                              pointers.data()),
                             "variant pack pointers"));
  RETURN_IF_ERROR(CudnnError(api,
                             api.SetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE,
                                              CUDNN_TYPE_VOID_PTR, 1, &workspace),
                             "variant pack workspace"));
  RETURN_IF_ERROR(CudnnError(api, api.Finalize(pack), "finalizing the variant pack"));
  return pack;
}

// GPU time per launch of `plan`: one warm-up launch, then kTimedLaunches between two events.
absl::StatusOr<float> TimePlan(const CudnnApi& api, cudnnHandle_t handle,
                               cudnnBackendDescriptor_t plan, cudnnBackendDescriptor_t pack,
                               cudaStream_t stream) {
  constexpr int kTimedLaunches = 5;
  ASSIGN_OR_RETURN(CudaEvent start, CudaEvent::Create());
  ASSIGN_OR_RETURN(CudaEvent stop, CudaEvent::Create());
  RETURN_IF_ERROR(CudnnError(api, api.Execute(handle, plan, pack), "executing a candidate plan"));
  RETURN_IF_ERROR(start.Record(stream));
  for (int i = 0; i < kTimedLaunches; ++i) {
    RETURN_IF_ERROR(CudnnError(api, api.Execute(handle, plan, pack), "executing a candidate plan"));
  }
  RETURN_IF_ERROR(stop.Record(stream));
  CUDA_RETURN_IF_ERROR(cudaEventSynchronize(stop.get()));
  ASSIGN_OR_RETURN(const float elapsed_ms, ElapsedMilliseconds(start, stop));
  return elapsed_ms / kTimedLaunches;
}

}  // namespace

struct CudnnAttention::State {
  explicit State(const CudnnApi& api) : api(&api), handle(api) {}

  const CudnnApi* api;
  Handle handle;
  std::vector<Descriptor> graph;  // tensors and operations the plans were built from
  std::vector<Descriptor> owned;  // the operation graph, engine configs, plans, variant pack
  cudnnBackendDescriptor_t plan = nullptr;          // the chosen one, owned above
  cudnnBackendDescriptor_t variant_pack = nullptr;  // owned above
  DeviceBuffer seq_len_q, seq_len_kv, q_offsets, lse_offsets, kv_offsets, page_table, workspace;
  float scale = 1.0f;
  float negative_infinity = -std::numeric_limits<float>::infinity();
  std::vector<int64_t> uids;
  std::vector<void*> pointers;
};

absl::StatusOr<int64_t> CudnnVersion() {
  ASSIGN_OR_RETURN(const CudnnApi* api, LoadCudnn());
  return static_cast<int64_t>(api->GetVersion());
}

CudnnAttention::CudnnAttention(std::unique_ptr<State> state, CudnnAttentionInfo info)
    : state_(std::move(state)), info_(info) {}

CudnnAttention::~CudnnAttention() = default;

absl::Status CheckCudnnAttentionGraph(const AttentionShape& shape, const SequenceLengths& lengths,
                                      int64_t cache_pages, bool with_lse, bool kv_in_place) {
  RETURN_IF_ERROR(CheckCudnnDtype(shape.dtype));
  ASSIGN_OR_RETURN(const CudnnApi* api, LoadCudnn());
  GraphBuilder g(*api);
  GraphSizes sizes(shape, lengths, cache_pages, with_lse);
  sizes.contiguous_kv = kv_in_place;
  sizes.kv_ragged = kv_in_place && sizes.b > 1;
  AddAttentionGraph(g, shape, sizes);
  RETURN_IF_ERROR(g.status());
  std::vector<Descriptor> owned;
  return FinalizeOperationGraph(*api, g, /*handle=*/nullptr, owned).status();
}

namespace {

// One way of running the problem: its graph (K and V through the page table, or in place),
// plans, variant pack and the chosen plan, with what was learnt building it.
struct BuiltVariant {
  std::unique_ptr<CudnnAttention::State> state;
  CudnnAttentionInfo info;
  float time_ms = -1;  // of the chosen plan, when timed
};

absl::StatusOr<BuiltVariant> BuildVariant(const CudnnApi& api, const AttentionProblem& problem,
                                          const CudnnIndexArrays& arrays, bool kv_in_place,
                                          bool always_time) {
  const AttentionShape& shape = problem.shape;
  const SequenceLengths& lengths = problem.lengths;
  const AttentionBuffers& buffers = problem.buffers;
  auto state = std::make_unique<CudnnAttention::State>(api);
  RETURN_IF_ERROR(state->handle.Create());
  const bool with_lse = buffers.lse != nullptr;
  ASSIGN_OR_RETURN(state->seq_len_q, UploadVector(lengths.q_lens));
  ASSIGN_OR_RETURN(state->seq_len_kv, UploadVector(lengths.kv_lens));
  ASSIGN_OR_RETURN(state->q_offsets, UploadVector(arrays.q_offsets));
  ASSIGN_OR_RETURN(state->lse_offsets, UploadVector(arrays.lse_offsets));
  if (kv_in_place) {
    ASSIGN_OR_RETURN(state->kv_offsets, UploadVector(arrays.kv_offsets));
  } else {
    ASSIGN_OR_RETURN(state->page_table, UploadVector(arrays.page_table));
  }
  state->scale = shape.EffectiveScale();

  GraphBuilder g(api);
  GraphSizes sizes(shape, lengths, buffers.num_pages, with_lse);
  sizes.contiguous_kv = kv_in_place;
  sizes.kv_ragged = kv_in_place && (sizes.b > 1 || arrays.kv_offsets.front() != 0);
  AddAttentionGraph(g, shape, sizes);
  RETURN_IF_ERROR(g.status());

  // The operation graph, then plans for the heuristic's best-ranked engine configurations.
  cudnnHandle_t handle = state->handle.get();
  std::vector<Descriptor>& owned = state->owned;
  ASSIGN_OR_RETURN(cudnnBackendDescriptor_t graph, FinalizeOperationGraph(api, g, handle, owned));
  int tried = 0;
  ASSIGN_OR_RETURN(std::vector<PlanCandidate> plans,
                   BuildPlans(api, graph, handle, kMaxTimedPlans, owned, tried));
  int64_t workspace_bytes = 16;
  for (const PlanCandidate& plan : plans) {
    workspace_bytes = std::max(workspace_bytes, plan.workspace_bytes);
  }
  ASSIGN_OR_RETURN(state->workspace, DeviceBuffer::Allocate(workspace_bytes));

  // The variant pack's tensors and where they live; built once, used by every launch.
  state->uids = {kQ, kKCache, kVCache, kO, kSeqLenQ, kSeqLenKv, kScale, kNegativeInfinity};
  state->pointers = {const_cast<void*>(buffers.q), const_cast<void*>(buffers.k_cache),
                     const_cast<void*>(buffers.v_cache), buffers.o, state->seq_len_q.data(),
                     state->seq_len_kv.data(), &state->scale, &state->negative_infinity};
  if (!kv_in_place) {
    state->uids.push_back(kPageTable);
    state->pointers.push_back(state->page_table.data());
  } else if (sizes.kv_ragged) {
    state->uids.insert(state->uids.end(), {kKRaggedOffset, kVRaggedOffset});
    state->pointers.insert(state->pointers.end(),
                           {state->kv_offsets.data(), state->kv_offsets.data()});
  }
  if (sizes.ragged) {
    state->uids.push_back(kQRaggedOffset);
    state->pointers.push_back(state->q_offsets.data());
  }
  if (with_lse) {
    state->uids.push_back(kLse);
    state->pointers.push_back(buffers.lse);
    if (sizes.ragged) {
      state->uids.push_back(kLseRaggedOffset);
      state->pointers.push_back(state->lse_offsets.data());
    }
  }
  ASSIGN_OR_RETURN(state->variant_pack, BuildVariantPack(api, state->uids, state->pointers,
                                                         state->workspace.data(), owned));

  // The heuristic's first choice is not always the fastest (on an H100 the ranking changes
  // with the shape), so when it offers several plans each runs on the real buffers and the
  // fastest is kept, as cuDNN's frontend autotuning does. A plan that fails to run is skipped.
  const PlanCandidate* chosen = &plans.front();
  if (plans.size() > 1 || always_time) {
    ASSIGN_OR_RETURN(CudaStream stream, CudaStream::Create());
    RETURN_IF_ERROR(CudnnError(api, api.SetStream(handle, stream.get()), "setting the stream"));
    chosen = nullptr;
    for (PlanCandidate& plan : plans) {
      absl::StatusOr<float> time_ms =
          TimePlan(api, handle, plan.plan, state->variant_pack, stream.get());
      if (!time_ms.ok()) continue;
      plan.time_ms = *time_ms;
      if (chosen == nullptr || plan.time_ms < chosen->time_ms) chosen = &plan;
    }
    RETURN_IF_ERROR(stream.Synchronize());
    RETURN_IF_ERROR(CudnnError(api, api.SetStream(handle, nullptr), "setting the stream"));
    if (chosen == nullptr) {
      return absl::InternalError(absl::StrCat("cuDNN built ", plans.size(),
                                              " plans for this attention graph and none ran"));
    }
  }
  state->plan = chosen->plan;

  BuiltVariant built;
  built.time_ms = chosen->time_ms;
  CudnnAttentionInfo& info = built.info;
  info.cudnn_version = static_cast<int64_t>(api.GetVersion());
  info.engine_index = chosen->engine_index;
  info.engine_configs_tried = tried;
  info.chosen_rank = chosen->rank;
  info.workspace_bytes = chosen->workspace_bytes;
  info.writes_lse = with_lse;
  info.reads_kv_in_place = kv_in_place;
  for (const PlanCandidate& plan : plans) {
    info.timed_plans.push_back({plan.engine_index, plan.rank, plan.time_ms, kv_in_place});
  }
  state->graph = g.TakeOwned();
  built.state = std::move(state);
  return built;
}

}  // namespace

absl::StatusOr<std::unique_ptr<CudnnAttention>> CudnnAttention::Create(
    const AttentionProblem& problem, const PagedLayout& layout) {
  const auto started = std::chrono::steady_clock::now();
  const AttentionBuffers& buffers = problem.buffers;
  if (buffers.q == nullptr || buffers.k_cache == nullptr || buffers.v_cache == nullptr ||
      buffers.o == nullptr) {
    return absl::InvalidArgumentError("cuDNN attention: q, k_cache, v_cache and o must be set");
  }
  RETURN_IF_ERROR(CheckCudnnDtype(problem.shape.dtype));
  ASSIGN_OR_RETURN(const CudnnApi* api, LoadCudnn());
  ASSIGN_OR_RETURN(const CudnnIndexArrays arrays,
                   BuildCudnnIndexArrays(problem.shape, problem.lengths, layout));

  // Pages in order can be read in place, without the page table. On an H100 that took cuDNN's
  // prefill from about 230 to 500-620 TFLOP/s, but made its decode at batch 4-8 up to 3x slower
  // (no split over the KV), so both graphs are built and timed and the faster is kept.
  const bool in_place_possible = !arrays.kv_offsets.empty();
  absl::StatusOr<BuiltVariant> chosen =
      BuildVariant(*api, problem, arrays, /*kv_in_place=*/false, in_place_possible);
  if (in_place_possible) {
    absl::StatusOr<BuiltVariant> in_place =
        BuildVariant(*api, problem, arrays, /*kv_in_place=*/true, /*always_time=*/true);
    if (in_place.ok()) {
      const bool paged_faster = chosen.ok() && chosen->time_ms >= 0 && in_place->time_ms >= 0 &&
                                chosen->time_ms < in_place->time_ms;
      // The record keeps every timed plan of both graphs, in place first.
      std::vector<CudnnAttentionInfo::TimedPlan> both = in_place->info.timed_plans;
      if (chosen.ok()) {
        both.insert(both.end(), chosen->info.timed_plans.begin(),
                    chosen->info.timed_plans.end());
      }
      if (!paged_faster) chosen = std::move(in_place);
      chosen->info.timed_plans = std::move(both);
    }
  }
  RETURN_IF_ERROR(chosen.status());
  chosen->info.build_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
          .count();
  return std::unique_ptr<CudnnAttention>(
      new CudnnAttention(std::move(chosen->state), chosen->info));
}

absl::Status CudnnAttention::Run(cudaStream_t stream) const {
  const CudnnApi& api = *state_->api;
  RETURN_IF_ERROR(CudnnError(api, api.SetStream(state_->handle.get(), stream), "setting the stream"));
  return CudnnError(api, api.Execute(state_->handle.get(), state_->plan, state_->variant_pack),
                    "executing the plan");
}

#else  // !GPUPROF_HAVE_CUDNN

struct CudnnAttention::State {};

namespace {
absl::Status NoCudnnHeaders() {
  return absl::UnavailableError("gpuprof was built without cuDNN's headers (cudnn_graph.h)");
}
}  // namespace

absl::StatusOr<int64_t> CudnnVersion() { return NoCudnnHeaders(); }
CudnnAttention::CudnnAttention(std::unique_ptr<State> state, CudnnAttentionInfo info)
    : state_(std::move(state)), info_(info) {}
CudnnAttention::~CudnnAttention() = default;
absl::StatusOr<std::unique_ptr<CudnnAttention>> CudnnAttention::Create(
    const AttentionProblem& problem, const PagedLayout&) {
  RETURN_IF_ERROR(CheckCudnnDtype(problem.shape.dtype));
  return NoCudnnHeaders();
}
absl::Status CudnnAttention::Run(cudaStream_t) const { return NoCudnnHeaders(); }
absl::Status CheckCudnnAttentionGraph(const AttentionShape& shape, const SequenceLengths&, int64_t,
                                      bool, bool) {
  RETURN_IF_ERROR(CheckCudnnDtype(shape.dtype));
  return NoCudnnHeaders();
}


#endif  // GPUPROF_HAVE_CUDNN

}  // namespace gpuprof::attention
