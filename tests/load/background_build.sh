#!/usr/bin/env bash
# A repeatable background build for the load test: PROCS loops (default 1) at nice 0 whatever the
# caller's niceness, for SECONDS (default 40), each compiling the same fixed C++ translation unit
# (the standard library's <regex>, <map>, <unordered_map>, <iostream>, <future>, instantiated)
# with `g++ -O2 -g` into a fresh object file every time, deleting the previous one: a compiler's
# CPU demand plus the dirty pages of its output, which ext4 writes back beside the store's
# fsyncs, without depending on what a build cache holds. Prints how many compiles finished.
# Usage: tests/load/background_build.sh [PROCS] [SECONDS]
set -euo pipefail
procs="${1:-1}"
seconds="${2:-40}"
dir="$(mktemp -d /tmp/background_build.XXXXXX)"
cat >"$dir/unit.cc" <<'SOURCE'
#include <algorithm>
#include <future>
#include <iostream>
#include <map>
#include <regex>
#include <string>
#include <unordered_map>
#include <vector>
int Count(const std::string& text) {
  std::map<std::string, int> words;
  std::unordered_map<std::string, std::vector<int>> places;
  const std::regex word("[a-z]+");
  int at = 0;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), word);
       it != std::sregex_iterator(); ++it, ++at) {
    ++words[it->str()];
    places[it->str()].push_back(at);
  }
  auto counted = std::async(std::launch::async, [&] { return words.size() + places.size(); });
  std::vector<std::pair<std::string, int>> sorted(words.begin(), words.end());
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.second > b.second; });
  for (const auto& [w, n] : sorted) std::cout << w << ' ' << n << '\n';
  return static_cast<int>(counted.get());
}
SOURCE
pids=()
for p in $(seq "$procs"); do
  nice -n "$((0 - $(nice)))" timeout "$seconds" sh -c '
    i=0
    while :; do
      g++ -std=c++20 -O2 -g -c "$1/unit.cc" -o "$1/unit.$2.$i.o" || exit 1
      rm -f "$1/unit.$2.$((i - 1)).o"
      i=$((i + 1))
      echo "$i" >"$1/count.$2"
    done' compile "$dir" "$p" &
  pids+=("$!")
done
cleanup() {
  trap - EXIT INT TERM
  kill "${pids[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
  echo "background build: $(cat "$dir"/count.* 2>/dev/null | paste -sd+ | bc 2>/dev/null || echo 0) compiles"
  rm -rf "$dir"
}
trap cleanup EXIT INT TERM
wait "${pids[@]}" 2>/dev/null || true
