// Counts of live things by key (places, streams), kept so that a map holds only what is live.
#ifndef GPUPROF_DAEMON_ADMISSION_LIVE_COUNTS_H_
#define GPUPROF_DAEMON_ADMISSION_LIVE_COUNTS_H_

#include <map>

namespace gpuprof::daemon {

// Decrements `counts[key]` by `by` and forgets the key at zero (never goes negative).
template <typename Key>
void DecrementLiveCount(std::map<Key, int>& counts, const Key& key, int by = 1) {
  const auto it = counts.find(key);
  if (it == counts.end()) return;
  it->second -= by;
  if (it->second <= 0) counts.erase(it);
}

template <typename Key>
int LiveCountOf(const std::map<Key, int>& counts, const Key& key) {
  const auto it = counts.find(key);
  return it == counts.end() ? 0 : it->second;
}

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_ADMISSION_LIVE_COUNTS_H_
