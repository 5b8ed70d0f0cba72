// The size of the CPU's last-level cache, as Linux describes it under
// /sys/devices/system/cpu/cpu0/cache/index*/{level,type,size}: the largest level that holds data
// (type Data or Unified). The peer program decides from it whether a fold's copies into the peers'
// outputs bypass the caches (primitives/peer_read.hpp). sysconf(_SC_LEVEL3_CACHE_SIZE) is not
// used: glibc reads it from CPUID, which under a hypervisor can describe the host's whole
// package (335 MiB on the development VM, whose sysfs and lscpu say 32 MiB).
#pragma once

#include <cstdint>
#include <fstream>
#include <string>

namespace occl {

// "32768K", "1M", "512" (bytes) -> bytes; 0 where the text is not a size.
inline uint64_t parseCacheSize(const std::string& text) {
  size_t used = 0;
  uint64_t value = 0;
  try {
    value = std::stoull(text, &used);
  } catch (...) {
    return 0;
  }
  const std::string unit = text.substr(used, text.find_first_of(" \n", used) - used);
  if (unit.empty()) return value;
  if (unit == "K") return value << 10;
  if (unit == "M") return value << 20;
  if (unit == "G") return value << 30;
  return 0;
}

// The last-level data cache described under `cacheDir` (a cpuN/cache directory), in bytes; 0
// where none is described.
inline uint64_t lastLevelCacheBytes(const std::string& cacheDir) {
  uint64_t best = 0;
  int bestLevel = 0;
  for (int index = 0;; ++index) {
    const std::string dir = cacheDir + "/index" + std::to_string(index) + "/";
    std::ifstream levelFile(dir + "level"), typeFile(dir + "type"), sizeFile(dir + "size");
    if (!levelFile || !typeFile || !sizeFile) break;
    int level = 0;
    std::string type, size;
    levelFile >> level;
    typeFile >> type;
    sizeFile >> size;
    if (type != "Data" && type != "Unified") continue;
    const uint64_t bytes = parseCacheSize(size);
    if (bytes != 0 && level > bestLevel) {
      bestLevel = level;
      best = bytes;
    }
  }
  return best;
}

// This machine's, read once per process; 0 where sysfs does not describe it.
inline uint64_t lastLevelCacheBytes() {
  static const uint64_t bytes = lastLevelCacheBytes("/sys/devices/system/cpu/cpu0/cache");
  return bytes;
}

}  // namespace occl
