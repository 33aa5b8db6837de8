// A stand-in libnvidia-ml for the NVML tests: two GPUs joined by four NVLinks. Some
// functions are left out on purpose so the test sees how missing symbols are reported.
//
// For the GPU health tests it also takes its GPUs and their faults from the environment:
//   FAKE_NVML_GPU_UUIDS=GPU-a,GPU-b,...  these GPUs instead (PCI bus ids 00000000:10:00.0 on)
//   FAKE_NVML_CONTROL=FILE               a file a test appends lines to, read at every call:
//     xid UUID N                             an Xid event (delivered once to each event set)
//     ecc UUID CORRECTED UNCORRECTED         volatile ECC error counts
//     retired UUID SINGLE_BIT DOUBLE_BIT PENDING    retired pages, pending 0/1
//     remap UUID CORRECTABLE UNCORRECTABLE PENDING FAILED    remapped rows, flags 0/1
// The last line of a kind for a GPU wins; a GPU without one has zero errors.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

struct FakeDevice {
  const char* bus_id;
  const char* uuid;
};

FakeDevice default_devices[] = {
    {"00000000:1B:00.0", "GPU-00000000-1111-2222-3333-444444444444"},
    {"00000000:43:00.0", "GPU-55555555-6666-7777-8888-999999999999"},
};
FakeDevice* fake_devices = default_devices;
size_t fake_device_count = 2;

// The GPUs of FAKE_NVML_GPU_UUIDS, set up once; their strings live as long as the library.
void SetUpDevicesFromEnvironment() {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* uuids = std::getenv("FAKE_NVML_GPU_UUIDS");
    if (uuids == nullptr || *uuids == '\0') return;
    static std::vector<std::string> names;
    std::stringstream list(uuids);
    for (std::string uuid; std::getline(list, uuid, ',');) names.push_back(uuid);
    static std::vector<std::string> bus_ids;
    static std::vector<FakeDevice> devices;
    bus_ids.reserve(names.size());
    for (size_t i = 0; i < names.size(); ++i) {
      char bus_id[32];
      std::snprintf(bus_id, sizeof(bus_id), "00000000:%02zX:00.0", 0x10 + i);
      bus_ids.push_back(bus_id);
    }
    for (size_t i = 0; i < names.size(); ++i) {
      devices.push_back({bus_ids[i].c_str(), names[i].c_str()});
    }
    fake_devices = devices.data();
    fake_device_count = devices.size();
  });
}

// The lines of FAKE_NVML_CONTROL, split into words.
std::vector<std::vector<std::string>> ControlLines() {
  std::vector<std::vector<std::string>> lines;
  const char* path = std::getenv("FAKE_NVML_CONTROL");
  if (path == nullptr) return lines;
  std::ifstream file(path);
  for (std::string line; std::getline(file, line);) {
    std::stringstream words(line);
    std::vector<std::string>& split = lines.emplace_back();
    for (std::string word; words >> word;) split.push_back(word);
  }
  return lines;
}

// The numbers of the last control line of `kind` for `device` (at least `count` of them).
std::vector<unsigned long long> LastControl(void* device, const std::string& kind, size_t count) {
  std::vector<unsigned long long> values(count, 0);
  const FakeDevice* fake = static_cast<FakeDevice*>(device);
  for (const auto& words : ControlLines()) {
    if (words.size() < count + 2 || words[0] != kind || words[1] != fake->uuid) continue;
    for (size_t i = 0; i < count; ++i) values[i] = std::strtoull(words[i + 2].c_str(), nullptr, 10);
  }
  return values;
}

struct FakeEventSet {
  std::set<void*> devices;
  size_t lines_seen = 0;  // control lines already looked at
};

struct FakeEventData {
  void* device;
  unsigned long long event_type;
  unsigned long long event_data;
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};

int init_count = 0;
int shutdown_count = 0;

constexpr int kSuccess = 0;
constexpr int kInvalidArgument = 2;
constexpr int kNotSupported = 3;
constexpr int kNotFound = 6;
constexpr int kTimeout = 10;
constexpr unsigned long long kXidEvent = 0x8;
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
  SetUpDevicesFromEnvironment();
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
  for (size_t i = 0; i < fake_device_count; ++i) {
    if (strcasecmp(fake_devices[i].bus_id, bus_id) == 0) {
      *device = &fake_devices[i];
      return kSuccess;
    }
  }
  return kNotFound;
}

int nvmlDeviceGetHandleByUUID(const char* uuid, void** device) {
  for (size_t i = 0; i < fake_device_count; ++i) {
    if (std::strcmp(fake_devices[i].uuid, uuid) == 0) {
      *device = &fake_devices[i];
      return kSuccess;
    }
  }
  return kNotFound;
}

int nvmlEventSetCreate(FakeEventSet** set) {
  *set = new FakeEventSet;
  // Faults written before the set existed are not news to it.
  (*set)->lines_seen = ControlLines().size();
  return kSuccess;
}

int nvmlEventSetFree(FakeEventSet* set) {
  delete set;
  return kSuccess;
}

int nvmlDeviceRegisterEvents(void* device, unsigned long long types, FakeEventSet* set) {
  if ((types & ~(kXidEvent | 0x1ull | 0x2ull)) != 0) return kNotSupported;
  set->devices.insert(device);
  return kSuccess;
}

int nvmlEventSetWait_v2(FakeEventSet* set, FakeEventData* data, unsigned timeout_ms) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    const auto lines = ControlLines();
    while (set->lines_seen < lines.size()) {
      const auto& words = lines[set->lines_seen++];
      if (words.size() != 3 || words[0] != "xid") continue;
      for (void* device : set->devices) {
        if (words[1] != static_cast<FakeDevice*>(device)->uuid) continue;
        std::memset(data, 0, sizeof(*data));
        data->device = device;
        data->event_type = kXidEvent;
        data->event_data = std::strtoull(words[2].c_str(), nullptr, 10);
        return kSuccess;
      }
    }
    if (std::chrono::steady_clock::now() >= deadline) return kTimeout;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

int nvmlDeviceGetTotalEccErrors(void* device, int error_type, int counter_type,
                                unsigned long long* count) {
  if (counter_type != 0) return kNotSupported;  // only volatile counts here
  *count = LastControl(device, "ecc", 2)[error_type == 0 ? 0 : 1];
  return kSuccess;
}

int nvmlDeviceGetRetiredPages(void* device, int cause, unsigned* count, unsigned long long*) {
  const unsigned pages = static_cast<unsigned>(LastControl(device, "retired", 3)[cause == 0 ? 0 : 1]);
  const bool fits = *count >= pages;
  *count = pages;
  return fits ? kSuccess : 7;  // NVML_ERROR_INSUFFICIENT_SIZE
}

int nvmlDeviceGetRetiredPagesPendingStatus(void* device, int* pending) {
  *pending = LastControl(device, "retired", 3)[2] != 0 ? 1 : 0;
  return kSuccess;
}

int nvmlDeviceGetRemappedRows(void* device, unsigned* correctable, unsigned* uncorrectable,
                              unsigned* pending, unsigned* failure) {
  const auto values = LastControl(device, "remap", 4);
  *correctable = static_cast<unsigned>(values[0]);
  *uncorrectable = static_cast<unsigned>(values[1]);
  *pending = static_cast<unsigned>(values[2]);
  *failure = static_cast<unsigned>(values[3]);
  return kSuccess;
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
