// Lets a tracer tell the measurement core's own launches apart from the workload's. The core
// brackets every launch it makes around the workload's work (the stream blocker, the L2 flush)
// with Begin and End; a tracer tags what is launched in between (by CUPTI correlation id),
// so its records carry `scaffolding` from the source instead of being guessed from names.
// Free of CUDA and CUPTI, so that measure/ does not depend on the tracer.
#ifndef GPUPROF_MEASURE_LAUNCH_ANNOTATIONS_H_
#define GPUPROF_MEASURE_LAUNCH_ANNOTATIONS_H_

namespace gpuprof::measure {

class ScaffoldingMarker {
 public:
  virtual ~ScaffoldingMarker() = default;
  // The calling thread's next launches are scaffolding, until End. Not nested.
  virtual void Begin() = 0;
  virtual void End() = 0;
};

// Begin on construction, End on destruction; does nothing for a null marker.
class ScopedScaffolding {
 public:
  explicit ScopedScaffolding(ScaffoldingMarker* marker) : marker_(marker) {
    if (marker_ != nullptr) marker_->Begin();
  }
  ScopedScaffolding(const ScopedScaffolding&) = delete;
  ScopedScaffolding& operator=(const ScopedScaffolding&) = delete;
  ~ScopedScaffolding() {
    if (marker_ != nullptr) marker_->End();
  }

 private:
  ScaffoldingMarker* const marker_;
};

}  // namespace gpuprof::measure

#endif  // GPUPROF_MEASURE_LAUNCH_ANNOTATIONS_H_
