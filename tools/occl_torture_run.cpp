// occl-torture's runner: builds the communicators and collectives, runs the ranks, sums the
// statistics and prints the report.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "device/coll_types.hpp"
#include "occl_torture.hpp"

namespace occl::tools {
namespace {

using namespace occl::torture;

struct Outcome {
  double seconds = 0;
  int itersDone = 0;
  bool hung = false;
  uint64_t wrong = 0;
  std::string firstWrong;
  uint64_t failedCallbacks = 0;
  std::string firstFailure;
  std::vector<occlCollStats_t> perColl;  // summed over ranks
  occlCollStats_t total{};
};

occlConfig_t configFor(const TortureOptions& o, bool forcePreempt) {
  occlConfig_t c;
  occlConfigInit(&c);
  c.daemonBlocks = o.blocks;
  c.orderPolicy = o.policy;
  c.spinPolicy = o.spin;
  c.forcePreempt = forcePreempt ? 1 : 0;
  c.disablePreemption = o.noPreempt ? 1 : 0;
  return c;
}

RunOptions runOptionsFor(const TortureOptions& o) {
  RunOptions ro;
  ro.iters = o.iters;
  ro.order = o.order;
  ro.seed = o.seed;
  ro.iterTimeout = std::chrono::milliseconds(o.timeoutMs);
  ro.lagRank0 = std::chrono::microseconds(o.lagUs);
  ro.gates = o.gates;
  return ro;
}

// One run of the workload; `forcePreempt` may differ from the options (switch-cost estimate).
bool runOnce(const TortureOptions& o, bool forcePreempt, Outcome& out) {
  PendingTracker tracker(o.ranks);
  CommSet comms;
  size_t first = 0;
  occlConfig_t config = configFor(o, forcePreempt);
  if (comms.initAll(o.ranks, config, &first) != occlSuccess) {
    std::fprintf(stderr, "occl-torture: occlCommInitAll failed: %s\n", occlGetLastError(nullptr));
    return false;
  }
  auto plans = singleCommPlans(comms, first, o.ranks, geometricCounts(static_cast<size_t>(o.colls), o.minBytes, o.maxBytes));
  for (auto& rankPlan : plans)
    for (size_t c = 0; c < rankPlan.size(); ++c) rankPlan[c].priority = static_cast<int>(c);  // later = more urgent
  std::string error;
  for (const auto& p : plans) {
    if (registerAll(p, &error) != occlSuccess) {
      std::fprintf(stderr, "occl-torture: occlCollRegister failed: %s\n", error.c_str());
      return false;
    }
  }
  const RunOptions ro = runOptionsFor(o);
  auto started = std::chrono::steady_clock::now();
  std::vector<RankResult> results = runRankThreads(plans, ro, tracker, comms);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  out.itersDone = o.iters;
  for (const RankResult& r : results) {
    out.hung = out.hung || r.timedOut;
    out.itersDone = std::min(out.itersDone, r.itersDone);
    out.wrong += r.wrong;
    if (out.firstWrong.empty()) out.firstWrong = r.firstWrong;
  }
  out.failedCallbacks = tracker.failedCallbacks();
  out.firstFailure = tracker.firstFailure();
  if (out.hung) return true;  // the communicators are aborted: no statistics
  for (size_t c = 0; c < plans[0].size(); ++c) {
    std::vector<std::pair<occlComm_t, uint64_t>> everyRank;
    for (const auto& rankPlan : plans) everyRank.emplace_back(rankPlan[c].comm, rankPlan[c].collId);
    out.perColl.push_back(sumStats(everyRank));
    addStats(out.total, out.perColl.back());
  }
  return true;
}

const char* orderName(int policy) {
  switch (policy) {
    case occlOrderFifo: return "fifo";
    case occlOrderPriority: return "priority";
    default: return "agreed";
  }
}

std::string bytesText(size_t b) {
  char buf[32];
  if (b >= (1 << 20) && b % (1 << 20) == 0) std::snprintf(buf, sizeof(buf), "%zu MiB", b >> 20);
  else if (b >= 1024 && b % 1024 == 0) std::snprintf(buf, sizeof(buf), "%zu KiB", b >> 10);
  else std::snprintf(buf, sizeof(buf), "%zu B", b);
  return buf;
}

double perColl(uint64_t n, uint64_t completions) {
  return completions == 0 ? 0.0 : static_cast<double>(n) / static_cast<double>(completions);
}

void printReport(const TortureOptions& o, const Outcome& out, const std::vector<size_t>& counts) {
  std::printf("%-10s %10s %12s %12s %12s %12s %12s\n", "collId", "bytes", "completions", "preemptions", "preempt/coll",
              "loads", "saves");
  for (size_t c = 0; c < out.perColl.size(); ++c) {
    const occlCollStats_t& s = out.perColl[c];
    std::printf("0x%-8zx %10s %12llu %12llu %12.2f %12llu %12llu\n", 0x100 + c, bytesText(counts[c] * 4).c_str(),
                static_cast<unsigned long long>(s.completions), static_cast<unsigned long long>(s.preemptions),
                perColl(s.preemptions, s.completions), static_cast<unsigned long long>(s.contextLoads),
                static_cast<unsigned long long>(s.contextSaves));
  }
  const occlCollStats_t& t = out.total;
  std::printf("total: completions %llu preemptions %llu (%.2f per collective per rank) context loads %llu saves %llu\n",
              static_cast<unsigned long long>(t.completions), static_cast<unsigned long long>(t.preemptions),
              perColl(t.preemptions, t.completions), static_cast<unsigned long long>(t.contextLoads),
              static_cast<unsigned long long>(t.contextSaves));
  double bytesPerIter = 0;
  for (size_t n : counts) bytesPerIter += static_cast<double>(n) * 4;
  const double iters = out.itersDone;
  const double algbw = bytesPerIter * iters / out.seconds / 1e9;
  std::printf("time %.3f s: %.1f collectives/s, algbw %.3f GB/s, busbw %.3f GB/s\n", out.seconds,
              static_cast<double>(counts.size()) * iters / out.seconds, algbw,
              algbw * busBwFactor(occlCollAllReduce, o.ranks));
}

// The cost of one switch, two ways: the daemon's tryTask timed on a collective that is never
// ready (what a switch costs the daemon itself), and the whole workload timed with forced
// preemption toggled, divided by the extra switches. The second also counts what forced
// preemption saves (every spin wait), so on a loaded host it can come out negative.
void printSwitchCost(const TortureOptions& o, const Outcome& base) {
  const SwitchCost probe = measureSwitchCost(200000);
  std::printf("switch cost (daemon probe, best of 10 batches): %.0f ns per switch with nothing to save, %.0f ns "
              "after one 64-B receive with the context saved (%llu saves)\n",
              probe.noSaveNs, probe.withSaveNs, static_cast<unsigned long long>(probe.savesSeen));
  if (!o.switchCost || o.noPreempt || o.processes) {
    std::printf("forced vs normal preemption (whole run): not run (%s)\n",
                o.noPreempt ? "--no-preempt" : o.processes ? "ranks are processes" : "--no-switch-cost");
    return;
  }
  Outcome other;
  if (!runOnce(o, !o.forcePreempt, other) || other.hung || other.wrong != 0) {
    std::printf("forced vs normal preemption (whole run): not compared (the %s run failed)\n",
                o.forcePreempt ? "normal" : "forced-preemption");
    return;
  }
  const Outcome& forced = o.forcePreempt ? base : other;
  const Outcome& normal = o.forcePreempt ? other : base;
  const double extra = static_cast<double>(forced.total.preemptions) - static_cast<double>(normal.total.preemptions);
  const double perRank = extra / o.ranks;  // ranks switch in parallel: charge wall time per rank
  std::printf("forced vs normal preemption (whole run): %.3f s with %llu switches vs %.3f s with %llu: ", forced.seconds,
              static_cast<unsigned long long>(forced.total.preemptions), normal.seconds,
              static_cast<unsigned long long>(normal.total.preemptions));
  if (perRank <= 0) std::printf("no extra switches\n");
  else
    std::printf("%+.2f us per extra switch per rank, the spin waits forced preemption skips included (not a switch "
                "cost: the probe above is)\n",
                (forced.seconds - normal.seconds) / perRank * 1e6);
}

// Sums (or, with occlMax, maximises) `values` over every rank of `comm` with one more occl
// AllReduce, in place; false on failure (named on stderr).
bool allReduceOverRanks(occlComm_t comm, uint64_t collId, std::vector<double>& values, occlRedOp_t op) {
  occlCollDesc_t d;
  occlCollDescInit(&d);
  d.type = occlCollAllReduce;
  d.count = values.size();
  d.datatype = occlFloat64;
  d.op = op;
  bool ok = occlCollRegister(comm, collId, &d) == occlSuccess &&
            occlSubmit(comm, collId, values.data(), values.data(), nullptr, nullptr) == occlSuccess &&
            occlCommWaitAll(comm, 60000) == occlSuccess;
  if (!ok) std::fprintf(stderr, "occl-torture: summing the results over ranks failed: %s\n", occlGetLastError(comm));
  (void)occlCollDeregister(comm, collId);
  return ok;
}

// One rank of a job whose ranks are processes (mpirun, torchrun): this rank's part of the
// workload; then its counters, summed over ranks by an occl AllReduce, and rank 0 reports.
bool runProcessRank(const TortureOptions& o, Outcome& out, int& rank, int& nRanks) {
  CommSet comms;
  if (comms.initFromEnv(configFor(o, o.forcePreempt), nullptr) != occlSuccess) {
    std::fprintf(stderr, "occl-torture: occlCommInitFromEnv failed: %s\n", occlGetLastError(nullptr));
    return false;
  }
  const occlComm_t comm = comms[0];
  occlCommUserRank(comm, &rank);
  occlCommCount(comm, &nRanks);
  std::vector<int> members(static_cast<size_t>(nRanks));
  for (int r = 0; r < nRanks; ++r) members[static_cast<size_t>(r)] = r;
  std::vector<CollPlan> plan;
  const std::vector<size_t> counts = geometricCounts(static_cast<size_t>(o.colls), o.minBytes, o.maxBytes);
  for (size_t c = 0; c < counts.size(); ++c) {
    CollPlan p;
    p.comm = comm;
    p.collId = 0x100 + c;
    p.count = counts[c];
    p.priority = static_cast<int>(c);  // later = more urgent, as with threads
    p.members = members;
    plan.push_back(p);
  }
  std::string error;
  if (registerAll(plan, &error) != occlSuccess) {
    std::fprintf(stderr, "occl-torture: rank %d: occlCollRegister failed: %s\n", rank, error.c_str());
    return false;
  }
  PendingTracker tracker(nRanks);
  RankBuffers buffers;
  const RunOptions ro = runOptionsFor(o);
  const auto started = std::chrono::steady_clock::now();
  const RankResult r = runRank(rank, plan, ro, tracker, buffers);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  out.itersDone = r.itersDone;
  if (r.timedOut) {
    out.hung = true;
    comms.abortAll();  // fails what is pending, so the buffers may go
    return true;
  }
  // Per collective: completions, preemptions, loads, saves; then wrong elements, failed callbacks.
  std::vector<double> sums;
  for (const CollPlan& p : plan) {
    occlCollStats_t st{};
    occlCollGetStats(comm, p.collId, &st);
    for (uint64_t v : {st.completions, st.preemptions, st.contextLoads, st.contextSaves})
      sums.push_back(static_cast<double>(v));
  }
  sums.push_back(static_cast<double>(r.wrong));
  sums.push_back(static_cast<double>(tracker.failedCallbacks()));
  std::vector<double> slowest{out.seconds};
  if (!allReduceOverRanks(comm, 0xF00D, sums, occlSum) || !allReduceOverRanks(comm, 0xF00E, slowest, occlMax))
    return false;
  out.seconds = slowest[0];
  for (size_t c = 0; c < plan.size(); ++c) {
    occlCollStats_t st{};
    st.completions = static_cast<uint64_t>(sums[4 * c]);
    st.preemptions = static_cast<uint64_t>(sums[4 * c + 1]);
    st.contextLoads = static_cast<uint64_t>(sums[4 * c + 2]);
    st.contextSaves = static_cast<uint64_t>(sums[4 * c + 3]);
    out.perColl.push_back(st);
    addStats(out.total, st);
  }
  out.wrong = static_cast<uint64_t>(sums[4 * plan.size()]);
  out.failedCallbacks = static_cast<uint64_t>(sums[4 * plan.size() + 1]);
  out.firstWrong = r.firstWrong.empty() ? "on another rank (see its stderr)" : r.firstWrong;
  if (r.wrong != 0) std::fprintf(stderr, "occl-torture: rank %d: first wrong: %s\n", rank, r.firstWrong.c_str());
  out.firstFailure = tracker.firstFailure().empty() ? "on another rank" : tracker.firstFailure();
  return true;
}

// The header, then the table and the verdict; returns the exit status.
int report(const TortureOptions& o, const Outcome& out) {
  const std::vector<size_t> counts = geometricCounts(static_cast<size_t>(o.colls), o.minBytes, o.maxBytes);
  std::printf("occl-torture: %d ranks x %d allreduces (%s..%s) x %d iterations; order %s, policy %s, spin %s, %d daemon "
              "block(s)%s%s, rank 0 lags %d us\n",
              o.ranks, o.colls, bytesText(o.minBytes).c_str(), bytesText(o.maxBytes).c_str(), o.iters,
              o.order == Order::Shuffled ? "shuffled" : "consistent", orderName(o.policy),
              o.spin == occlSpinPolicyFixed ? "fixed" : "stickiness", o.blocks, o.forcePreempt ? ", forced preemption" : "",
              o.noPreempt ? ", preemption disabled" : "", o.lagUs);
  if (out.hung) {
    std::printf("HANG: an iteration passed --timeout-ms %lld (pending collectives above); %d iterations done\n",
                static_cast<long long>(o.timeoutMs), out.itersDone);
    std::printf("#wrong %llu\n", static_cast<unsigned long long>(out.wrong));
    return 2;
  }
  printReport(o, out, counts);
  printSwitchCost(o, out);
  if (out.failedCallbacks != 0) std::printf("failed callbacks: %llu, first: %s\n",
                                            static_cast<unsigned long long>(out.failedCallbacks), out.firstFailure.c_str());
  if (out.wrong != 0) std::printf("first wrong: %s\n", out.firstWrong.c_str());
  std::printf("#wrong %llu\n", static_cast<unsigned long long>(out.wrong));
  return out.wrong != 0 || out.failedCallbacks != 0 ? 1 : 0;
}

}  // namespace

int runTorture(const TortureOptions& o) {
  Outcome out;
  if (!o.processes) {
    if (!runOnce(o, o.forcePreempt, out)) return 3;
    return report(o, out);
  }
  TortureOptions job = o;
  int rank = 0;
  if (!runProcessRank(o, out, rank, job.ranks)) return 3;
  if (rank != 0) return out.hung ? 2 : out.wrong != 0 || out.failedCallbacks != 0 ? 1 : 0;
  return report(job, out);
}

}  // namespace occl::tools
