// The torture workload: inputs, submission orders, the per-rank iteration loop, the bit-exact
// check and the statistics helpers (declared in torture.hpp).
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <thread>

#include "torture/torture.hpp"

namespace occl::torture {
namespace {

uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Input of `rank` at element i: a(i) * (rank + 1) + b(rank), small integers so every sum is exact
// in float32 whatever the reduction order. a(i) takes the top bits of a Weyl sequence seeded by
// (iteration, collective): no short period, so a chunk or tile written to the wrong place, a
// stale iteration, or another collective's data all change the result.
struct InputRule {
  uint32_t seed;
  int iter;

  static InputRule of(int iter, uint64_t collId) {
    return {static_cast<uint32_t>(splitmix(static_cast<uint64_t>(iter) * 0x10001ull ^ collId)), iter};
  }
  uint32_t a(size_t i) const { return ((static_cast<uint32_t>(i) * 0x9E3779B1u + seed) >> 29) + 1; }
  uint32_t b(int rank) const { return static_cast<uint32_t>(iter + 5 * rank) % 7; }
};

void fillInput(std::vector<float>& buf, const InputRule& rule, int rank) {
  const uint32_t w = static_cast<uint32_t>(rank) + 1, b = rule.b(rank);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<float>(rule.a(i) * w + b);
}

// Counts elements that differ bit-wise from the sum over `members`; remembers the first.
uint64_t checkOutput(const std::vector<float>& out, const InputRule& rule, const CollPlan& p, int rank,
                     std::string& firstWrong) {
  uint32_t w = 0, b = 0;
  for (int m : p.members) {
    w += static_cast<uint32_t>(m) + 1;
    b += rule.b(m);
  }
  uint64_t wrong = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    const float expected = static_cast<float>(rule.a(i) * w + b);
    if (std::memcmp(&out[i], &expected, sizeof(float)) == 0) continue;
    if (wrong++ == 0 && firstWrong.empty()) {
      char buf[200];
      std::snprintf(buf, sizeof(buf), "rank %d collId 0x%llx iteration %d element %zu: %g, expected %g", rank,
                    static_cast<unsigned long long>(p.collId), rule.iter, i, static_cast<double>(out[i]),
                    static_cast<double>(expected));
      firstWrong = buf;
    }
  }
  return wrong;
}

uint64_t foldHash(uint64_t h, const std::vector<float>& out) {
  for (float f : out) {
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof(bits));
    h = (h ^ bits) * 0x100000001b3ull;
  }
  return h;
}

}  // namespace

std::vector<size_t> submissionOrder(int rank, int iter, size_t k, Order order, uint64_t seed) {
  std::vector<size_t> perm(k);
  std::iota(perm.begin(), perm.end(), size_t{0});
  if (order == Order::Consistent || k == 0) return perm;
  std::mt19937_64 rng(splitmix(seed ^ splitmix(static_cast<uint64_t>(rank) << 32 | static_cast<uint32_t>(iter))));
  std::shuffle(perm.begin(), perm.end(), rng);
  const size_t first = (static_cast<size_t>(rank) + static_cast<size_t>(iter)) % k;
  std::rotate(perm.begin(), std::find(perm.begin(), perm.end(), first), perm.end());
  return perm;
}

std::vector<size_t> geometricCounts(size_t k, size_t minBytes, size_t maxBytes) {
  minBytes = std::max<size_t>(minBytes, sizeof(float));
  std::vector<size_t> ladder;  // minBytes, x4, ... up to maxBytes
  for (size_t b = minBytes; b <= std::max(maxBytes, minBytes); b *= 4) ladder.push_back(b / sizeof(float));
  std::vector<size_t> counts;
  for (size_t i = 0; i < k; ++i) counts.push_back(ladder[i % ladder.size()]);
  return counts;
}

occlCollDesc_t allReduceDesc(const CollPlan& p) {
  occlCollDesc_t d;
  occlCollDescInit(&d);
  d.type = occlCollAllReduce;
  d.count = p.count;
  d.datatype = occlFloat32;
  d.op = occlSum;
  d.priority = p.priority;
  d.nBlocks = p.nBlocks;
  d.algorithm = p.algorithm;
  return d;
}

occlResult_t registerAll(const std::vector<CollPlan>& plan, std::string* error) {
  for (const CollPlan& p : plan) {
    occlCollDesc_t d = allReduceDesc(p);
    if (occlResult_t r = occlCollRegister(p.comm, p.collId, &d); r != occlSuccess) {
      if (error != nullptr) *error = occlGetLastError(p.comm);
      return r;
    }
  }
  return occlSuccess;
}

// Waits as a blocking caller does, in occlCommWaitAll on each communicator of the plan (which lends
// this thread to the daemon and the poller, comm_poller.cpp), all within `bound`; the tracker,
// fed by the callbacks, then says whether the iteration completed.
void waitInOccl(const std::vector<CollPlan>& plan, std::chrono::milliseconds bound) {
  const auto deadline = std::chrono::steady_clock::now() + bound;
  std::vector<occlComm_t> waited;
  for (const CollPlan& p : plan) {
    if (std::find(waited.begin(), waited.end(), p.comm) != waited.end()) continue;
    waited.push_back(p.comm);
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return;
    (void)occlCommWaitAll(p.comm, left.count());
  }
}

RankResult runRank(int rank, const std::vector<CollPlan>& plan, const RunOptions& o, PendingTracker& tracker,
                   RankBuffers& buffers) {
  RankResult result;
  const size_t k = plan.size();
  auto& send = buffers.send;
  auto& recv = buffers.recv;
  send.assign(k, {});
  recv.assign(k, {});
  std::vector<PendingTracker::Slot*> slots(k);
  for (size_t c = 0; c < k; ++c) {
    send[c].resize(plan[c].count);
    recv[c].assign(plan[c].count, -1.0f);
    slots[c] = tracker.slot(rank, plan[c].collId);
  }
  std::vector<occlGate_t> gates(k);
  for (int iter = 0; iter < o.iters; ++iter) {
    if (!o.gates)
      for (size_t c = 0; c < k; ++c) fillInput(send[c], InputRule::of(iter, plan[c].collId), rank);
    if (rank == 0 && o.lagRank0.count() > 0) std::this_thread::sleep_for(o.lagRank0);
    for (size_t c : submissionOrder(rank, iter, k, o.order, o.seed)) {
      occlResult_t r = tracker.submit(plan[c].comm, slots[c], send[c].data(), recv[c].data(), o.gates ? &gates[c] : nullptr);
      if (r != occlSuccess) {
        reportHang(tracker, "rank " + std::to_string(rank) + ": occlSubmit failed: " + occlGetLastError(plan[c].comm));
        result.timedOut = true;
        return result;
      }
    }
    // The opener writes each input only now, after its submission, then opens its gate: were a
    // collective started before its gate, it would send stale data (a wrong result, and a race
    // under ThreadSanitizer). Its order is a shuffle of its own, unrelated to the submission's.
    std::string openFailed;
    std::thread opener;
    if (o.gates)
      opener = std::thread([&, iter] {
        for (size_t c : submissionOrder(rank, iter, k, Order::Shuffled, o.seed ^ 0x6a7e5eedull)) {
          fillInput(send[c], InputRule::of(iter, plan[c].collId), rank);
          if (occlGateOpen(plan[c].comm, gates[c]) != occlSuccess && openFailed.empty())
            openFailed = std::string("occlGateOpen: ") + occlGetLastError(plan[c].comm);
          std::this_thread::yield();
        }
      });
    waitInOccl(plan, o.iterTimeout);
    const bool done = tracker.wait(rank, o.iterTimeout);
    if (opener.joinable()) opener.join();
    if (!openFailed.empty()) {
      reportHang(tracker, "rank " + std::to_string(rank) + " iteration " + std::to_string(iter) + ": " + openFailed);
      result.timedOut = true;
      return result;
    }
    if (!done) {
      reportHang(tracker, "rank " + std::to_string(rank) + " iteration " + std::to_string(iter) + " not complete after " +
                              std::to_string(o.iterTimeout.count()) + " ms");
      result.timedOut = true;
      return result;
    }
    for (size_t c = 0; c < k; ++c) {
      result.wrong += checkOutput(recv[c], InputRule::of(iter, plan[c].collId), plan[c], rank, result.firstWrong);
      if (o.hashOutputs) result.outputHash = foldHash(result.outputHash, recv[c]);
    }
    result.completed += k;
    result.itersDone = iter + 1;
  }
  return result;
}

std::vector<RankResult> runRankThreads(const std::vector<std::vector<CollPlan>>& plans, const RunOptions& o,
                                       PendingTracker& tracker, CommSet& comms) {
  std::vector<RankResult> results(plans.size());
  std::vector<RankBuffers> buffers(plans.size());  // freed only after the abort below
  std::vector<std::thread> threads;
  for (size_t r = 0; r < plans.size(); ++r)
    threads.emplace_back([&, r] { results[r] = runRank(static_cast<int>(r), plans[r], o, tracker, buffers[r]); });
  for (auto& t : threads) t.join();
  bool hung = std::any_of(results.begin(), results.end(), [](const RankResult& x) { return x.timedOut; });
  if (hung) comms.abortAll();
  return results;
}

std::vector<std::vector<CollPlan>> singleCommPlans(const CommSet& comms, size_t first, int nRanks,
                                                   const std::vector<size_t>& counts, uint64_t base) {
  std::vector<int> members(static_cast<size_t>(nRanks));
  std::iota(members.begin(), members.end(), 0);
  std::vector<std::vector<CollPlan>> plans(static_cast<size_t>(nRanks));
  for (int r = 0; r < nRanks; ++r) {
    for (size_t c = 0; c < counts.size(); ++c) {
      CollPlan p;
      p.comm = comms[first + static_cast<size_t>(r)];
      p.collId = base + c;
      p.count = counts[c];
      p.members = members;
      plans[static_cast<size_t>(r)].push_back(p);
    }
  }
  return plans;
}

void addStats(occlCollStats_t& into, const occlCollStats_t& s) {
  const bool first = into.submissions == 0 && into.contextLoads == 0 && into.parts == 0;
  into.parts = first || into.parts == s.parts ? s.parts : 0;
  into.submissions += s.submissions;
  into.completions += s.completions;
  into.preemptions += s.preemptions;
  into.contextLoads += s.contextLoads;
  into.contextSaves += s.contextSaves;
  into.queueWaitNs += s.queueWaitNs;
  into.executionNs += s.executionNs;
}

occlCollStats_t sumStats(const std::vector<std::pair<occlComm_t, uint64_t>>& colls) {
  occlCollStats_t total{};
  for (const auto& [comm, id] : colls) {
    occlCollStats_t s{};
    if (occlCollGetStats(comm, id, &s) == occlSuccess) addStats(total, s);
  }
  return total;
}

std::string statsProblems(const occlCollStats_t& s) {
  std::string out;
  auto expect = [&](bool ok, const std::string& what) {
    if (!ok) out += (out.empty() ? "" : "; ") + what;
  };
  const auto n = static_cast<unsigned long long>(s.parts);
  char buf[256];
  std::snprintf(buf, sizeof(buf), "submissions %llu completions %llu preemptions %llu loads %llu saves %llu parts %llu",
                static_cast<unsigned long long>(s.submissions), static_cast<unsigned long long>(s.completions),
                static_cast<unsigned long long>(s.preemptions), static_cast<unsigned long long>(s.contextLoads),
                static_cast<unsigned long long>(s.contextSaves), n);
  expect(s.completions == s.submissions, "completions != submissions");
  expect(s.contextLoads >= s.completions, "contextLoads < completions");
  if (n != 0)
    expect(s.contextLoads == s.preemptions + n * s.completions, "contextLoads != preemptions + parts * completions");
  else
    expect(s.contextLoads >= s.preemptions + s.completions, "contextLoads < preemptions + completions");
  expect(s.contextSaves <= s.preemptions, "contextSaves > preemptions");
  expect(s.completions == 0 || s.executionNs > 0, "executionNs == 0");
  return out.empty() ? out : out + " (" + buf + ")";
}

double processCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto secs = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6; };
  return secs(u.ru_utime) + secs(u.ru_stime);
}

}  // namespace occl::torture
