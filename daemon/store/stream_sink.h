// The receiving end of an event stream (an experiment's or a sweep's events), as the daemon's
// cores fan events out to gRPC streams.
#ifndef GPUPROF_DAEMON_STORE_STREAM_SINK_H_
#define GPUPROF_DAEMON_STORE_STREAM_SINK_H_

namespace gpuprof::daemon {

// Called with the producer's lock held: implementations queue the event and return; they must
// not block or call back into the producer.
template <typename Event>
class StreamSink {
 public:
  virtual ~StreamSink() = default;
  virtual void OnEvent(const Event& event) = 0;
  // No more events will come: the stream's subject ended, or the daemon is stopping.
  virtual void OnEnd() = 0;
};

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_STORE_STREAM_SINK_H_
