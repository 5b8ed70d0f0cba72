// Test support: a job of ranks as processes that meet through occlGetUniqueId, and the files
// they use to tell the parent where they are. Built on processes.hpp (re-executed children).
//
// Parent: spawnWithUniqueId starts rank 0's child, which creates the id (its listener must live
// in rank 0's process) and writes it to a pipe; the parent hands it to the other ranks in
// OCCL_MP_ID. Child: initRank reads it back. Scenario and rank travel in OCCL_MP_* variables.
#pragma once

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/processes.hpp"
#include "support/ranks.hpp"

namespace occl::test::proc {

inline std::string toHex(const void* data, size_t n) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char b = static_cast<const unsigned char*>(data)[i];
    out += kDigits[b >> 4];
    out += kDigits[b & 15];
  }
  return out;
}

// Starts `nRanks` children running the gtest test `entry` with OCCL_MP_SCENARIO, OCCL_MP_NRANKS,
// OCCL_MP_RANK and the id (also stored in *idOut when given), each behind `prefix` (spawn()).
// Returns their pids in rank order (fewer on failure, with a test failure).
inline std::vector<pid_t> spawnWithUniqueId(const std::string& entry, const std::string& scenario, int nRanks,
                                            Env extra = {}, occlUniqueId* idOut = nullptr,
                                            const std::vector<std::string>& prefix = {}) {
  int fds[2];
  if (pipe(fds) != 0) {
    ADD_FAILURE() << "pipe: " << std::strerror(errno);
    return {};
  }
  extra["OCCL_MP_SCENARIO"] = scenario;
  extra["OCCL_MP_NRANKS"] = std::to_string(nRanks);
  Env rank0 = extra;
  rank0["OCCL_MP_RANK"] = "0";
  rank0["OCCL_MP_ID_FD"] = std::to_string(fds[1]);
  std::vector<pid_t> pids{spawn(entry, rank0, prefix)};
  close(fds[1]);  // later children must not inherit the write end
  occlUniqueId id{};
  size_t got = 0;
  pollfd p{fds[0], POLLIN, 0};
  while (got < sizeof(id) && poll(&p, 1, 30000) > 0) {
    const ssize_t n = read(fds[0], id.internal + got, sizeof(id) - got);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  close(fds[0]);
  if (got != sizeof(id)) {
    ADD_FAILURE() << "rank 0 did not deliver the unique id";
    return pids;
  }
  if (idOut != nullptr) *idOut = id;
  extra["OCCL_MP_ID"] = toHex(&id, sizeof(id));
  for (int r = 1; r < nRanks; ++r) {
    Env e = extra;
    e["OCCL_MP_RANK"] = std::to_string(r);
    pids.push_back(spawn(entry, e, prefix));
  }
  return pids;
}

inline int envInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::atoi(v) : fallback;
}

// Child side: rank 0 creates the id and writes it to the parent's pipe; the others decode it.
inline occlUniqueId idFromEnvironment() {
  occlUniqueId id{};
  if (const char* fdText = std::getenv("OCCL_MP_ID_FD")) {
    expectOk(occlGetUniqueId(&id), nullptr, "occlGetUniqueId");
    const int fd = std::atoi(fdText);
    if (write(fd, &id, sizeof(id)) != static_cast<ssize_t>(sizeof(id))) throw std::runtime_error("writing the id");
    close(fd);
    return id;
  }
  const std::string hex = std::getenv("OCCL_MP_ID");
  for (size_t i = 0; i < sizeof(id); ++i) id.internal[i] = static_cast<char>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  return id;
}

inline occlComm_t initRank(int rank, int nRanks, const occlConfig_t& cfg) {
  occlUniqueId id = idFromEnvironment();
  occlComm_t comm = nullptr;
  expectOk(occlCommInitRank(&comm, nRanks, id, rank, &cfg), nullptr, "occlCommInitRank");
  return comm;
}

inline bool waitForFile(const std::string& path, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (access(path.c_str(), F_OK) != 0) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

inline void touch(const std::string& path, const std::string& text = "1") { std::ofstream(path) << text; }

// A private directory under /tmp for a job's marker files; removed by the destructor.
class TempDir {
 public:
  TempDir() {
    char dirTemplate[] = "/tmp/occl-job-XXXXXX";
    if (mkdtemp(dirTemplate) == nullptr) throw std::runtime_error(std::string("mkdtemp: ") + std::strerror(errno));
    path_ = dirTemplate;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace occl::test::proc
