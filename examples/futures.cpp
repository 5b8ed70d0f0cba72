// Two collectives on 4 ranks with the C++ wrapper occl/occl.hpp: communicators are RAII objects,
// failures are exceptions, and a submission either returns a std::future or takes a
// std::function callback. Each rank runs on its own thread, as in a framework with one worker per
// device, and submits the two collectives in its own order: even ranks gradients first, odd ranks
// the loss first.
#include <occl/occl.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kRanks = 4;
constexpr uint64_t kGradients = 1;  // collIds: the framework's choice, the same on every rank
constexpr uint64_t kLossMax = 2;
constexpr size_t kCount = size_t{1} << 14;
constexpr std::chrono::seconds kBound{60};  // a bug must fail the program, not hang it

occlCollDesc_t allReduce(size_t count, occlRedOp_t op) {
  occlCollDesc_t d;
  occl::check(occlCollDescInit(&d));
  d.type = occlCollAllReduce;
  d.count = count;
  d.datatype = occlFloat64;
  d.op = op;
  return d;
}

// Small integers and halves: exact in double whatever order the reduction runs in.
double gradient(int rank, size_t i) { return (rank + 1) * static_cast<double>(i % 5 + 1); }
double expectedGradient(size_t i) { return kRanks * (kRanks + 1) / 2 * static_cast<double>(i % 5 + 1); }
double loss(int rank) { return 0.5 * rank; }

// What one rank hands to occl. It must outlive the communicator: if a rank gives up early, the
// daemon may still write into these buffers until the communicator is finalized.
struct RankState {
  std::vector<double> grads = std::vector<double>(kCount);
  double worstLoss = 0;
  std::atomic<occlResult_t> lossStatus{occlInProgress};
};

// Submits both collectives, waits, checks; returns "" when right, else what went wrong.
std::string runRank(occl::Comm& comm, RankState& s) {
  const int rank = comm.rank();
  for (size_t i = 0; i < kCount; ++i) s.grads[i] = gradient(rank, i);
  s.worstLoss = loss(rank);

  // The callback runs on the poller thread: record and return, never block there.
  auto onLoss = [&s](uint64_t, occlResult_t status) { s.lossStatus = status; };
  std::future<occlResult_t> gradsDone;
  if (rank % 2 == 0) {
    gradsDone = comm.submit(kGradients, s.grads.data(), s.grads.data());
    comm.submit(kLossMax, &s.worstLoss, &s.worstLoss, onLoss);
  } else {
    comm.submit(kLossMax, &s.worstLoss, &s.worstLoss, onLoss);
    gradsDone = comm.submit(kGradients, s.grads.data(), s.grads.data());
  }

  if (gradsDone.wait_for(kBound) != std::future_status::ready) return "gradients: no completion within the bound";
  if (occlResult_t r = gradsDone.get(); r != occlSuccess) return std::string("gradients: ") + occlGetErrorString(r);
  comm.waitAll(std::chrono::milliseconds(kBound).count());  // every callback, the loss one included
  if (s.lossStatus != occlSuccess) return std::string("loss: ") + occlGetErrorString(s.lossStatus);
  if (s.worstLoss != loss(kRanks - 1)) return "loss: got " + std::to_string(s.worstLoss);
  for (size_t i = 0; i < kCount; ++i)
    if (s.grads[i] != expectedGradient(i))
      return "gradients[" + std::to_string(i) + "] = " + std::to_string(s.grads[i]) + ", expected " +
             std::to_string(expectedGradient(i));
  return "";
}

// One thread per rank; an exception (occl::Error) becomes that rank's failure message.
std::vector<std::string> runAll(std::vector<occl::Comm>& comms, std::vector<RankState>& states) {
  std::vector<std::string> failures(comms.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < comms.size(); ++r) {
    threads.emplace_back([&, r] {
      try {
        failures[r] = runRank(comms[r], states[r]);
      } catch (const std::exception& e) {
        failures[r] = e.what();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  return failures;
}

}  // namespace

int main() {
  try {
    std::vector<RankState> states(kRanks);  // declared first, so destroyed after the communicators
    occlConfig_t config = occl::defaultConfig();  // the OCCL_* environment over the defaults
    config.collTimeoutMs = std::chrono::milliseconds(kBound).count();
    std::vector<occl::Comm> comms = occl::Comm::all(kRanks, &config);
    // Registration is local: no rank waits for another here.
    for (occl::Comm& comm : comms) {
      comm.registerCollective(kGradients, allReduce(kCount, occlSum));
      comm.registerCollective(kLossMax, allReduce(1, occlMax));
    }
    std::vector<std::string> failures = runAll(comms, states);
    bool good = true;
    for (size_t r = 0; r < failures.size(); ++r) {
      if (failures[r].empty()) continue;
      std::fprintf(stderr, "futures: rank %zu: %s\n", r, failures[r].c_str());
      good = false;
    }
    std::printf("futures: %d ranks, gradient sum and loss max in opposite orders on even/odd ranks: %s\n", kRanks,
                good ? "OK" : "WRONG");
    return good ? 0 : 1;  // the communicators finalize and close as `comms` goes out of scope
  } catch (const occl::Error& e) {
    std::fprintf(stderr, "futures: %s\n", e.what());
    return 1;
  }
}
