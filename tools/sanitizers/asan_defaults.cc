// Linked into every binary under --config=asan through --custom_malloc (see .bazelrc), so that
// the daemons and CLIs a test starts carry the same leak suppressions as the test itself.
//
// Suppressed, with the reason:
// - libcares.so: gRPC's DNS resolver (Debian's c-ares, not instrumented) keeps a 10-byte
//   allocation from its channel setup until exit; every CLI that dialled a TCP address
//   reported it. Nothing of ours is on that allocation's stack.
extern "C" const char* __lsan_default_suppressions() {
  return "leak:libcares.so\n";
}
