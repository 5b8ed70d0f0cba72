// occl-register: what registered collectives cost a rank with peers, one rank per process (start
// it under mpirun, or with torchrun's variables: occlCommInitFromEnv). Each rank registers N
// AllReduces of `count` floats and reports, per registration: wall time, the /dev/shm bytes the
// job's connectors grew by (the whole tmpfs, divided among the ranks) and the anonymous memory
// this process grew by. Then every registered AllReduce runs once, and its sums are checked.
//
//   mpirun -np 2 occl-register 100000 [count]
#include <sys/statvfs.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "cli/flags.hpp"
#include "occl/occl.h"

namespace {

long anonKiB() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("RssAnon:", 0) == 0) return std::atol(line.c_str() + 8);
  return 0;
}

double devShmUsed() {
  struct statvfs fs {};
  if (statvfs("/dev/shm", &fs) != 0) return 0;
  return static_cast<double>(fs.f_blocks - fs.f_bfree) * static_cast<double>(fs.f_frsize);
}

int fail(occlComm_t comm, const char* what) {
  std::fprintf(stderr, "occl-register: %s: %s\n", what, comm != nullptr ? occlGetLastError(comm) : "");
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  constexpr const char* kSynopsis = "usage: occl-register [REGISTRATIONS (20000)] [FLOATS per AllReduce (1)]\n";
  const occl::cli::Parsed parsed = occl::cli::parse(std::vector<std::string>(argv + 1, argv + argc), {});
  if (parsed.help || parsed.version) {
    std::printf("%s", parsed.version ? (occl::cli::versionLine("occl-register") + "\n").c_str() : kSynopsis);
    return 0;
  }
  const std::vector<std::string>& words = parsed.positionals;
  const std::optional<int64_t> nArg = words.size() > 0 ? occl::cli::parseInt(words[0]) : 20000;
  const std::optional<int64_t> countArg = words.size() > 1 ? occl::cli::parseInt(words[1]) : 1;
  std::string error = parsed.error;
  if (error.empty() && words.size() > 2) error = "unexpected third argument \"" + words[2] + "\"";
  if (error.empty() && (!nArg || *nArg <= 0)) error = "REGISTRATIONS \"" + words[0] + "\": expected an integer > 0";
  if (error.empty() && (!countArg || *countArg <= 0)) error = "FLOATS \"" + words[1] + "\": expected an integer > 0";
  if (!error.empty()) {
    std::fprintf(stderr, "occl-register: %s\n%s", error.c_str(), kSynopsis);
    return 2;
  }
  const long n = static_cast<long>(*nArg);
  const long count = static_cast<long>(*countArg);
  occlComm_t comm = nullptr;
  if (occlCommInitFromEnv(&comm, nullptr) != occlSuccess) return fail(comm, "occlCommInitFromEnv");
  int rank = 0, ranks = 0;
  occlCommUserRank(comm, &rank);
  occlCommCount(comm, &ranks);
  occlCollDesc_t desc;
  occlCollDescInit(&desc);
  desc.count = static_cast<size_t>(count);
  constexpr uint64_t kFirstId = 0x10000;
  // The first registration makes what every later one shares (the shm pool): not counted.
  if (occlCollRegister(comm, kFirstId - 1, &desc) != occlSuccess) return fail(comm, "register");
  const double shmBefore = devShmUsed();
  const long anonBefore = anonKiB();
  const auto start = std::chrono::steady_clock::now();
  for (long i = 0; i < n; ++i) {
    if (occlCollRegister(comm, kFirstId + static_cast<uint64_t>(i), &desc) != occlSuccess) {
      std::fprintf(stderr, "rank %d: registration %ld of %ld failed\n", rank, i + 1, n);
      return fail(comm, "occlCollRegister");
    }
  }
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  const long anonAfter = anonKiB();
  std::vector<float> send(desc.count, static_cast<float>(rank + 1)), recv(desc.count);
  const float expected = static_cast<float>(ranks * (ranks + 1) / 2);
  long wrong = 0;
  for (long i = 0; i < n; ++i) {
    if (occlSubmit(comm, kFirstId + static_cast<uint64_t>(i), send.data(), recv.data(), nullptr, nullptr) !=
        occlSuccess)
      return fail(comm, "occlSubmit");
    if (occlCommWaitAll(comm, 60000) != occlSuccess) return fail(comm, "occlCommWaitAll");
    for (float v : recv) wrong += v != expected;
  }
  const double shmAfter = devShmUsed();  // every rank's connectors are mapped in by now
  std::printf("rank %d of %d: %ld registrations of %ld floats: %.2f us each, /dev/shm %.0f B and anonymous memory "
              "%.0f B per registration per rank; ran each once, #wrong %ld\n",
              rank, ranks, n, count, us / static_cast<double>(n), (shmAfter - shmBefore) / static_cast<double>(n) / ranks,
              static_cast<double>(anonAfter - anonBefore) * 1024.0 / static_cast<double>(n), wrong);
  if (occlCommFinalize(comm) != occlSuccess) return fail(comm, "occlCommFinalize");
  occlCommDestroy(comm);
  return wrong == 0 ? 0 : 1;
}
