// A stand-in libnvidia-ml for nvml_loader_test: two GPUs joined by four NVLinks. Some
// functions are left out on purpose so the test sees how missing symbols are reported.
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace {

struct FakeDevice {
  const char* bus_id;
  const char* uuid;
};

FakeDevice fake_devices[] = {
    {"00000000:1B:00.0", "GPU-00000000-1111-2222-3333-444444444444"},
    {"00000000:43:00.0", "GPU-55555555-6666-7777-8888-999999999999"},
};

int init_count = 0;
int shutdown_count = 0;

constexpr int kSuccess = 0;
constexpr int kInvalidArgument = 2;
constexpr int kNotSupported = 3;
constexpr int kNotFound = 6;
constexpr int kNvLinksBetweenTheGpus = 4;

FakeDevice* AsFake(void* device) { return static_cast<FakeDevice*>(device); }

struct FakePciInfo {
  char bus_id_legacy[16];
  unsigned int domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};

}  // namespace

extern "C" {

int nvmlInit_v2() {
  ++init_count;
  return kSuccess;
}

int nvmlShutdown() {
  ++shutdown_count;
  return kSuccess;
}

const char* nvmlErrorString(int result) {
  switch (result) {
    case kSuccess:
      return "Success";
    case kNotSupported:
      return "Not Supported";
    case kNotFound:
      return "Not Found";
    default:
      return "Unknown Error";
  }
}

int nvmlSystemGetDriverVersion(char* version, unsigned length) {
  std::snprintf(version, length, "%s", "580.95.05");
  return kSuccess;
}

int nvmlDeviceGetHandleByPciBusId_v2(const char* bus_id, void** device) {
  for (FakeDevice& fake : fake_devices) {
    if (strcasecmp(fake.bus_id, bus_id) == 0) {
      *device = &fake;
      return kSuccess;
    }
  }
  return kNotFound;
}

int nvmlDeviceGetUUID(void* device, char* uuid, unsigned length) {
  std::snprintf(uuid, length, "%s", AsFake(device)->uuid);
  return kSuccess;
}

int nvmlDeviceGetTopologyCommonAncestor(void*, void*, int* level) {
  *level = 50;  // NVML_TOPOLOGY_SYSTEM
  return kSuccess;
}

int nvmlDeviceGetNvLinkState(void*, unsigned link, int* active) {
  if (link >= 18) return kInvalidArgument;
  *active = link < kNvLinksBetweenTheGpus ? 1 : 0;
  return kSuccess;
}

int nvmlDeviceGetNvLinkRemotePciInfo_v2(void* device, unsigned link, FakePciInfo* info) {
  if (link >= kNvLinksBetweenTheGpus) return kNotSupported;
  const bool first = AsFake(device) == &fake_devices[0];
  std::memset(info, 0, sizeof(*info));
  info->bus = first ? 0x43 : 0x1B;
  std::snprintf(info->bus_id, sizeof(info->bus_id), "%s", fake_devices[first ? 1 : 0].bus_id);
  return kSuccess;
}

int nvmlDeviceGetTemperature(void*, int, unsigned*) { return kNotSupported; }

int nvmlDeviceGetMemoryInfo(void*, uint64_t* memory) {
  memory[0] = 80ull << 30;  // total
  memory[1] = 79ull << 30;  // free
  memory[2] = 1ull << 30;   // used
  return kSuccess;
}

// Left out: nvmlDeviceGetPowerUsage, both clocks-event-reason names, and the rest.

int FakeNvmlInitCount() { return init_count; }
int FakeNvmlShutdownCount() { return shutdown_count; }

}  // extern "C"
