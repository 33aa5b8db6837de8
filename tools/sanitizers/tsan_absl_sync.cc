// Linked into every binary under --config=tsan (through --custom_malloc).
//
// Debian's abseil is a prebuilt, uninstrumented shared library, so ThreadSanitizer does not see
// absl::Mutex hand data from one thread to the next: every access guarded by an absl::Mutex
// would be reported as a race. This file interposes the Mutex/CondVar/Notification entry points
// (an executable's definitions take precedence over a shared library's, also for the
// library's own calls through its PLT), calls the real ones found with dlsym(RTLD_NEXT), and
// tells TSan about the happens-before edges: release before a lock is given up, acquire after
// it is taken. Reader locks are treated like writer locks, which can only hide a race between
// two readers, and readers do not write.
//
// It also holds the TSan options and suppressions so that every process started by a test
// (gpuprofd, workers) uses them too, without depending on the environment.
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/base/options.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

#define GPUPROF_STRINGIFY_INNER(x) #x
#define GPUPROF_STRINGIFY(x) GPUPROF_STRINGIFY_INNER(x)

namespace {

// The mangled name of an abseil member function: "_ZN" ("_ZNK" when const) + "4absl" + the
// inline namespace + rest.
std::string AbslSymbol(const char* rest) {
  const bool is_const = rest[0] == 'K';
  if (is_const) ++rest;
  const std::string inline_namespace = GPUPROF_STRINGIFY(ABSL_OPTION_INLINE_NAMESPACE_NAME);
  return std::string(is_const ? "_ZNK" : "_ZN") + "4absl" +
         std::to_string(inline_namespace.size()) + inline_namespace + rest;
}

// `rest` starts with 'K' for a const member function.
void* RealFunction(const char* rest) {
  const std::string name = AbslSymbol(rest);
  void* function = dlsym(RTLD_NEXT, name.c_str());
  if (function == nullptr) {
    std::fprintf(stderr, "tsan_absl_sync: abseil has no symbol %s\n", name.c_str());
    std::abort();
  }
  return function;
}

template <typename Function>
Function Real(const char* rest) {
  return reinterpret_cast<Function>(RealFunction(rest));
}

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

void Mutex::Lock() {
  static const auto real = Real<void (*)(Mutex*)>("5Mutex4LockEv");
  real(this);
  __tsan_acquire(this);
}

void Mutex::ReaderLock() {
  static const auto real = Real<void (*)(Mutex*)>("5Mutex10ReaderLockEv");
  real(this);
  __tsan_acquire(this);
}

bool Mutex::TryLock() {
  static const auto real = Real<bool (*)(Mutex*)>("5Mutex7TryLockEv");
  const bool locked = real(this);
  if (locked) __tsan_acquire(this);
  return locked;
}

bool Mutex::ReaderTryLock() {
  static const auto real = Real<bool (*)(Mutex*)>("5Mutex13ReaderTryLockEv");
  const bool locked = real(this);
  if (locked) __tsan_acquire(this);
  return locked;
}

void Mutex::Unlock() {
  static const auto real = Real<void (*)(Mutex*)>("5Mutex6UnlockEv");
  __tsan_release(this);
  real(this);
}

void Mutex::ReaderUnlock() {
  static const auto real = Real<void (*)(Mutex*)>("5Mutex12ReaderUnlockEv");
  __tsan_release(this);
  real(this);
}

// Await* gives the mutex up while it waits and holds it again on return.
void Mutex::Await(const Condition& condition) {
  static const auto real = Real<void (*)(Mutex*, const Condition&)>("5Mutex5AwaitERKNS0_9ConditionE");
  __tsan_release(this);
  real(this, condition);
  __tsan_acquire(this);
}

bool Mutex::AwaitWithTimeout(const Condition& condition, Duration timeout) {
  static const auto real = Real<bool (*)(Mutex*, const Condition&, Duration)>(
      "5Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  __tsan_release(this);
  const bool met = real(this, condition, timeout);
  __tsan_acquire(this);
  return met;
}

bool Mutex::AwaitWithDeadline(const Condition& condition, Time deadline) {
  static const auto real = Real<bool (*)(Mutex*, const Condition&, Time)>(
      "5Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  __tsan_release(this);
  const bool met = real(this, condition, deadline);
  __tsan_acquire(this);
  return met;
}

void Mutex::LockWhen(const Condition& condition) {
  static const auto real =
      Real<void (*)(Mutex*, const Condition&)>("5Mutex8LockWhenERKNS0_9ConditionE");
  real(this, condition);
  __tsan_acquire(this);
}

void Mutex::ReaderLockWhen(const Condition& condition) {
  static const auto real =
      Real<void (*)(Mutex*, const Condition&)>("5Mutex14ReaderLockWhenERKNS0_9ConditionE");
  real(this, condition);
  __tsan_acquire(this);
}

bool Mutex::LockWhenWithTimeout(const Condition& condition, Duration timeout) {
  static const auto real = Real<bool (*)(Mutex*, const Condition&, Duration)>(
      "5Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  const bool met = real(this, condition, timeout);
  __tsan_acquire(this);
  return met;
}

bool Mutex::LockWhenWithDeadline(const Condition& condition, Time deadline) {
  static const auto real = Real<bool (*)(Mutex*, const Condition&, Time)>(
      "5Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  const bool met = real(this, condition, deadline);
  __tsan_acquire(this);
  return met;
}

bool Mutex::ReaderLockWhenWithTimeout(const Condition& condition, Duration timeout) {
  static const auto real = Real<bool (*)(Mutex*, const Condition&, Duration)>(
      "5Mutex25ReaderLockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  const bool met = real(this, condition, timeout);
  __tsan_acquire(this);
  return met;
}

bool Mutex::ReaderLockWhenWithDeadline(const Condition& condition, Time deadline) {
  static const auto real = Real<bool (*)(Mutex*, const Condition&, Time)>(
      "5Mutex26ReaderLockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  const bool met = real(this, condition, deadline);
  __tsan_acquire(this);
  return met;
}

// A condition variable wait gives the mutex up and takes it again.
void CondVar::Wait(Mutex* mutex) {
  static const auto real = Real<void (*)(CondVar*, Mutex*)>("7CondVar4WaitEPNS0_5MutexE");
  __tsan_release(mutex);
  real(this, mutex);
  __tsan_acquire(mutex);
}

bool CondVar::WaitWithTimeout(Mutex* mutex, Duration timeout) {
  static const auto real = Real<bool (*)(CondVar*, Mutex*, Duration)>(
      "7CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  __tsan_release(mutex);
  const bool timed_out = real(this, mutex, timeout);
  __tsan_acquire(mutex);
  return timed_out;
}

bool CondVar::WaitWithDeadline(Mutex* mutex, Time deadline) {
  static const auto real = Real<bool (*)(CondVar*, Mutex*, Time)>(
      "7CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  __tsan_release(mutex);
  const bool timed_out = real(this, mutex, deadline);
  __tsan_acquire(mutex);
  return timed_out;
}

// HasBeenNotified() is an inline atomic load of a flag the uninstrumented Notify() stores:
// make Notify() a release on the object and the waits an acquire.
void Notification::Notify() {
  static const auto real = Real<void (*)(Notification*)>("12Notification6NotifyEv");
  __tsan_release(this);
  real(this);
}

void Notification::WaitForNotification() const {
  static const auto real =
      Real<void (*)(const Notification*)>("K12Notification19WaitForNotificationEv");
  real(this);
  __tsan_acquire(const_cast<Notification*>(this));
}

bool Notification::WaitForNotificationWithTimeout(Duration timeout) const {
  static const auto real = Real<bool (*)(const Notification*, Duration)>(
      "K12Notification30WaitForNotificationWithTimeoutENS0_8DurationE");
  const bool notified = real(this, timeout);
  if (notified) __tsan_acquire(const_cast<Notification*>(this));
  return notified;
}

bool Notification::WaitForNotificationWithDeadline(Time deadline) const {
  static const auto real = Real<bool (*)(const Notification*, Time)>(
      "K12Notification31WaitForNotificationWithDeadlineENS0_4TimeE");
  const bool notified = real(this, deadline);
  if (notified) __tsan_acquire(const_cast<Notification*>(this));
  return notified;
}

ABSL_NAMESPACE_END
}  // namespace absl

namespace {

// abseil's own lock-order checker keeps its graph (GraphCycles) under an internal spin lock
// that lives in the uninstrumented library: TSan sees the graph's allocations from several
// threads but not the lock, and reports abseil's bookkeeping as races. The checker is switched
// off in TSan builds (plain and ASan builds keep it), before main starts threads.
const bool kAbslDeadlockDetectionOff = [] {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return true;
}();

}  // namespace

extern "C" {

// Every finding fails the process that has it (a test, or a daemon or worker a test started).
const char* __tsan_default_options() { return "halt_on_error=1:second_deadlock_stack=1"; }

// Findings inside the uninstrumented system libraries that TSan cannot follow, each with the
// reason. None of them names a gpuprof frame: a race in our own code still fails the test.
const char* __tsan_default_suppressions() {
  return
      // absl::Status keeps its payloads in a reference-counted representation that our code
      // and gRPC's uninstrumented internals share (gRPC reports errors as absl::Status): the
      // count's release/acquire happens partly where TSan cannot see it, so freeing the last
      // reference looks like a race with gRPC's earlier read. Only abseil-internal frames
      // (the library that made the access) are covered.
      "called_from_lib:libabsl_status.so\n"
      // gRPC hands calls, their arenas and their sockets between its threads through atomics
      // and reference counts inside the uninstrumented library (seen: grpc_core::Arena freed
      // on one completion-queue thread after grpcpp's callback read it on another; a channel's
      // socket closed after its last sendmsg). Only accesses made by libgrpc are covered.
      "called_from_lib:libgrpc.so\n"
      // upb, gRPC's own message runtime (uninstrumented), copying a streamed message's
      // serialized bytes on a gRPC thread: grpcpp's StartWrite allocated them (an absl::Cord)
      // on our worker-report thread and libgrpc handed the buffer over through atomics TSan
      // does not see, so the copy looks like a race with the allocation. Seen in
      // daemon_e2e_test under load (2 of 10 runs); only accesses made by libupb are covered.
      "called_from_lib:libupb.so\n"
      // The same hand-offs seen from grpcpp's header code, which is compiled into our
      // binaries (instrumented) while libgrpc between its two halves is not. A callback call
      // lives in gRPC's call arena; an operation's state (its CallOpSet, interceptor state,
      // byte buffer, the callback tag) is written on the thread that starts it (a Finish or
      // StartWrite from the RPC pool, OnCancel) and read on the completion-queue thread that
      // libgrpc hands the finished batch to; the call object is built on one thread and
      // counted down, then destroyed in CallOnDone, on others. The edges between them are
      // libgrpc's atomics and executor, which TSan does not see. Seen in daemon_e2e_test
      // once RPCs finished on the daemon's own threads; every report had grpcpp or std code
      // at both racing accesses (our frames only as callers of Finish/StartWrite).
      // race_top: only when the racing access itself is grpcpp's (the top frame), so our
      // reactor callbacks that Run() calls stay checked.
      "race_top:grpc::internal::Callback\n"  // CallbackWithSuccessTag::Run, handler lambdas
      "race_top:grpc::internal::CallOp\n"    // CallOpSet::FillOps/FinalizeResult, *::FinishOp
      "race_top:grpc::ByteBuffer\n"          // a sent message's buffer
      // Run() checking that the tag's std::function is set before calling it, and calling it
      // (our code has no std::function<void(bool)>: only grpcpp's tags are covered).
      "race_top:std::_Function_base::_M_empty\n"
      "race_top:std::function<void (bool)>::operator()\n"
      // Stacks through grpcpp's per-operation interceptor state, a tag being set, or a call
      // object's construction: none of them runs our code below it.
      "race:grpc::internal::InterceptorBatchMethodsImpl\n"
      "race:grpc::internal::CallbackWithSuccessTag::Set\n"
      "race:grpc::internal::ServerCallbackCall::ServerCallbackCall\n"
      // The same call's reference count and core call pointer, counted down or read on a
      // completion-queue thread after another of libgrpc's threads set them (seen in
      // daemon_e2e_test's concurrent submits and cancels, 3 of 80 runs on 2 cores: the count's
      // fetch_sub in ServerCallbackCall::Unref, Call::call() in CallOpSet::FinalizeResult, and
      // the reactor pointer's atomic load in a unary Finish's callback; 1 of 120 more, once
      // these were covered: the tag's std::function, below). The earlier write's stack could
      // not be restored: it was libgrpc's.
      "race:grpc::internal::ServerCallbackCall::Unref\n"
      "race_top:grpc::internal::Call::call\n"
      "race:grpc::internal::CallbackUnaryHandler*::ServerCallbackUnaryImpl::Finish\n"
      "race:grpc::internal::CallbackServerStreamingHandler*::ServerCallbackWriterImpl::Finish\n"
      // A write started before gRPC bound the reactor (a Watch whose replay, on the RPC pool,
      // wrote before the handler returned) is replayed by grpcpp at binding time, on gRPC's
      // thread; the message stays ours until OnWriteDone, which frees it after the write
      // completes, an edge through libgrpc.
      "race:grpc::ServerWriteReactor*::InternalBindWriter\n"
      // A call's teardown: gRPC's last reference is dropped inside libgrpc++, which then
      // destroys the call's state in CallOnDone. This one also covers our reactors' OnDone,
      // which CallOnDone calls (it reads the reactor's state under its mutex and deletes it).
      "race:::ServerCallback*Impl::CallOnDone\n"
      // libgrpc++ allocates a call's handler state on one thread; grpcpp's header code (ours,
      // instrumented) deserializes into it on the completion-queue thread that runs the call
      // (seen: CallbackUnaryHandler<CancelRequest>::Deserialize). Only accesses libgrpc++
      // makes through intercepted calls (its allocations) are covered.
      "called_from_lib:libgrpc++.so\n"
      // libgpr is gRPC's allocator (gpr_malloc/gpr_realloc): a buffer freed by libgrpc on one
      // client thread and reallocated on another looked like a race in realloc (seen with 16
      // client threads in one test process). Only accesses made by libgpr are covered.
      "called_from_lib:libgpr.so\n"
      // gRPC parsing the time it attached to a status of its own (absl::ParseTime in the
      // uninstrumented libabsl_time, reading a buffer libgrpc filled on another thread).
      "called_from_lib:libabsl_time.so\n"
      // gRPC starts its executor and resolver threads itself and joins them only in
      // grpc_shutdown; a CLI that exits on an error (daemon unreachable) leaves them finished
      // but unjoined, which TSan reports as a leak at exit. Only threads gRPC created.
      "thread:grpc_core::Thread::Thread\n";
}

}  // extern "C"
