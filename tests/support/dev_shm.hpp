// Test support: the names a job leaves in /dev/shm. Every shared-memory name of a job is
// occl-<nonce>-... (src/transport/shm/pool.cpp: the connector pool and its arenas), which the job's
// last communicator unlinks.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace occl::test {

// The file names (not paths) in /dev/shm of the job whose nonce is `nonceHex` (16 hex digits).
inline std::vector<std::string> jobShmNames(const std::string& nonceHex) {
  std::vector<std::string> found;
  const std::string prefix = "occl-" + nonceHex + "-";
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm"))
    if (e.path().filename().string().rfind(prefix, 0) == 0) found.push_back(e.path().filename().string());
  return found;
}

// The nonce (16 hex digits) of the job whose shm segments this process maps, read from
// /proc/self/maps; "" while it maps none.
inline std::string mappedJobNonce() {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    const size_t at = line.find("/dev/shm/occl-");
    if (at != std::string::npos) return line.substr(at + 14, 16);
  }
  return "";
}

// Every job nonce this process maps segments of (a communicator and, say, its shrunk successor).
inline std::vector<std::string> mappedJobNonces() {
  std::vector<std::string> found;
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    const size_t at = line.find("/dev/shm/occl-");
    if (at == std::string::npos) continue;
    const std::string nonce = line.substr(at + 14, 16);
    bool known = false;
    for (const std::string& f : found) known = known || f == nonce;
    if (!known) found.push_back(nonce);
  }
  return found;
}

inline std::vector<std::string> jobShmNames(uint64_t nonce) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(nonce));
  return jobShmNames(std::string(hex));
}

}  // namespace occl::test
