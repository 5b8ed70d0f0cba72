// occl-moe-bench: the MoE token exchange (moe.hpp) on occl's AllToAllv (desc.vectorCounts,
// occlSubmitV), each step one blocking submission (submit, wait for its callback).
//   occl-moe-bench -g 8                        8 ranks as threads (occlCommInitAll)
//   mpirun -np 8 occl-moe-bench                one rank per process (occlCommInitFromEnv)
// Each row registers one AllToAllv bounded by its largest block (every token to one expert) and
// deregisters it after; the max and sum the ranks agree on go through a float64 AllReduce.
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "cli/flags.hpp"
#include "moe.hpp"
#include "occl/occl.h"

namespace {

using namespace occl::bench::moe;

void check(occlResult_t r, occlComm_t comm, const char* what) {
  if (r != occlSuccess)
    throw std::runtime_error(std::string(what) + ": " + occlGetErrorString(r) + ": " + occlGetLastError(comm));
}

struct Done {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  occlResult_t status = occlSuccess;
  static void callback(uint64_t, occlResult_t status, void* arg) {
    auto* d = static_cast<Done*>(arg);
    std::lock_guard<std::mutex> lock(d->mu);
    d->done = true;
    d->status = status;
    d->cv.notify_all();
  }
};

class Occl final : public Exchange {
 public:
  // `shared`: ranks are processes, whose buffers come from occlMemAlloc and whose AllToAllv is
  // registered with desc.sharedBuffers, so that each rank takes its chunks straight from its
  // peers' buffers as threads do (the peer AllToAll) instead of through slots.
  Occl(occlComm_t comm, bool shared) : comm_(comm), shared_(shared) {
    occlCollDesc_t d;
    occlCollDescInit(&d);
    d.count = 1;
    d.datatype = occlFloat64;
    d.op = occlMax;
    check(occlCollRegister(comm_, kMaxId, &d), comm_, "register max");
    d.op = occlSum;
    check(occlCollRegister(comm_, kSumId, &d), comm_, "register sum");
  }
  void prepare(uint64_t maxBlockBytes) override {
    if (registered_) check(occlCollDeregister(comm_, exchangeId_), comm_, "deregister");
    occlCollDesc_t d;
    occlCollDescInit(&d);
    d.type = occlCollAllToAll;
    d.datatype = occlUint8;
    d.count = maxBlockBytes;
    d.vectorCounts = 1;
    d.sharedBuffers = shared_ ? 1 : 0;
    check(occlCollRegister(comm_, ++exchangeId_, &d), comm_, "register the AllToAllv");
    registered_ = true;
  }
  void alltoallv(const uint8_t* send, const std::vector<size_t>& sendCounts, const std::vector<size_t>& sendDispls,
                 uint8_t* recv, const std::vector<size_t>& recvCounts, const std::vector<size_t>& recvDispls) override {
    const occlVectors_t v{sendCounts.data(), sendDispls.data(), recvCounts.data(), recvDispls.data()};
    Done done;
    check(occlSubmitV(comm_, exchangeId_, send, recv, &v, &Done::callback, &done), comm_, "occlSubmitV");
    wait(done);
  }
  void barrier() override { (void)max(0); }
  uint8_t* buffer(int which, size_t bytes) override {
    if (!shared_) return Exchange::buffer(which, bytes);
    Shared& b = memory_[which];
    if (b.bytes < bytes) {
      // The previous row's collective is deregistered before a new buffer is needed (prepare).
      if (b.data != nullptr) occlMemFree(b.data);
      b.data = nullptr;
      check(occlMemAlloc(&b.data, bytes), comm_, "occlMemAlloc");
      b.bytes = bytes;
    }
    return static_cast<uint8_t*>(b.data);
  }
  ~Occl() override {
    for (Shared& b : memory_)
      if (b.data != nullptr) occlMemFree(b.data);
  }
  double max(double value) override { return reduce(kMaxId, value); }
  double sum(double value) override { return reduce(kSumId, value); }

 private:
  static constexpr uint64_t kMaxId = 1, kSumId = 2;
  double reduce(uint64_t id, double value) {
    Done done;
    check(occlSubmit(comm_, id, &value, &value, &Done::callback, &done), comm_, "occlSubmit");
    wait(done);
    return value;
  }
  // occlCommWaitAll lends this thread to the daemon on the host backend, as occl-bench waits.
  void wait(Done& done) {
    check(occlCommWaitAll(comm_, 600000), comm_, "occlCommWaitAll");
    std::unique_lock<std::mutex> lock(done.mu);
    done.cv.wait(lock, [&] { return done.done; });
    check(done.status, comm_, "the collective");
  }

  struct Shared {
    void* data = nullptr;
    size_t bytes = 0;
  };
  occlComm_t comm_;
  bool shared_;
  Shared memory_[2];
  uint64_t exchangeId_ = 100;
  bool registered_ = false;
};

std::string preamble(int nRanks, bool processes) {
  return "# occl-moe-bench: occl AllToAllv (occlSubmitV), " + std::to_string(nRanks) + " rank(s) as " +
         (processes ? "processes, buffers from occlMemAlloc (desc.sharedBuffers)" : "threads") + "\n";
}

int runRank(const Options& o, occlComm_t comm, int rank, int nRanks, bool processes) {
  int code = kExitFailed;
  try {
    Occl exchange(comm, processes);
    code = run(o, exchange, rank, nRanks, rank == 0 ? &std::cout : nullptr, preamble(nRanks, processes));
  } catch (const std::exception& e) {
    std::cerr << "occl-moe-bench: rank " << rank << ": " << e.what() << "\n";
  }
  occlCommDestroy(comm);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv, argv + argc);
  const std::string program = std::filesystem::path(args[0]).filename().string();
  Options o;
  if (std::string error = parse(args, o); !error.empty()) {
    std::cerr << program << ": " << error << "\n";
    return kExitUsage;
  }
  if (o.help) {
    std::cout << usage(program, "  -g,--ngpus N         ranks as threads of this process (1: one rank per process "
                                "under mpirun or torchrun)\n");
    return kExitOk;
  }
  if (o.version) {
    std::cout << occl::cli::versionLine(program) << "\n";
    return kExitOk;
  }
  occlConfig_t config;
  occlConfigInit(&config);
  if (o.localRanks == 1) {
    occlComm_t comm = nullptr;
    if (occlCommInitFromEnv(&comm, &config) != occlSuccess) {
      std::cerr << program << ": occlCommInitFromEnv: " << occlGetLastError(nullptr)
                << " (one rank per process runs under mpirun or torchrun; -g N runs N threads)\n";
      return kExitFailed;
    }
    int rank = 0, n = 1;
    occlCommUserRank(comm, &rank);
    occlCommCount(comm, &n);
    return runRank(o, comm, rank, n, true);
  }
  std::vector<occlComm_t> comms(static_cast<size_t>(o.localRanks));
  if (occlCommInitAll(comms.data(), o.localRanks, nullptr, &config) != occlSuccess) {
    std::cerr << program << ": occlCommInitAll: " << occlGetLastError(nullptr) << "\n";
    return kExitFailed;
  }
  std::vector<int> codes(comms.size(), kExitFailed);
  {
    std::vector<std::jthread> threads;
    for (int r = 0; r < o.localRanks; ++r)
      threads.emplace_back([&, r] { codes[static_cast<size_t>(r)] = runRank(o, comms[static_cast<size_t>(r)], r, o.localRanks, false); });
  }
  for (int c : codes)
    if (c != kExitOk) return c;
  return kExitOk;
}
