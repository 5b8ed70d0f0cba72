// Soak: 8 ranks (threads) in 3 overlapping sets of communicators — the world, two halves and
// four pairs, so every rank belongs to three — with two registered collectives of every type
// (allreduce, allgather, reducescatter, reduce, broadcast, alltoall, send/recv) on each
// communicator, dtypes, ops, counts, roots and placements drawn at random. Every round each rank
// submits its collectives in its own random order, across its communicators, and every receive
// buffer is checked bit-exactly against what nccl-tests would expect. The suite runs 10,000
// collectives (OCCL_SOAK_COLLECTIVES overrides it); OCCL_SOAK_SECONDS runs rounds until that many
// seconds have passed instead (tools/soak.sh: the one-hour release soak).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "support/collective_cases.hpp"
#include "support/ranks.hpp"

namespace occl::test {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kRanks = 8;
constexpr int kVariants = 2;         // registered collectives per (communicator, type)
constexpr size_t kMaxCount = 1200;   // elements: up to 9.6 KB of 8-byte types, several 4 KiB tiles
constexpr size_t kSlotBytes = 4096;  // small tiles: more steps per collective, less connector memory
constexpr auto kRoundTimeout = std::chrono::seconds(60);

constexpr int kDtypes[] = {occlInt8,    occlUint8,    occlInt32,   occlUint32,  occlInt64,      occlUint64,
                           occlFloat16, occlBfloat16, occlFloat32, occlFloat64, occlFloat8e4m3, occlFloat8e5m2};
constexpr int kOps[] = {occlSum, occlProd, occlMin, occlMax, occlAvg};

struct Group {
  std::string name;
  std::vector<int> members;  // global ranks; index = rank in the communicator
  std::unique_ptr<CommGroup> comms;
};

// One registered collective: its communicator, its spec (roots are ranks of that communicator).
struct Coll {
  size_t group;
  Spec spec;
  uint64_t collId;
};

std::vector<Group> makeGroups(const occlConfig_t& config) {
  std::vector<Group> groups;
  auto add = [&](std::string name, std::vector<int> members) {
    groups.push_back({std::move(name), members, std::make_unique<CommGroup>(static_cast<int>(members.size()), config)});
  };
  add("world", {0, 1, 2, 3, 4, 5, 6, 7});
  add("half 0", {0, 1, 2, 3});
  add("half 1", {4, 5, 6, 7});
  for (int p = 0; p < kRanks; p += 2) add(absl::StrFormat("pair %d-%d", p, p + 1), {p, p + 1});
  return groups;
}

std::vector<Coll> drawCollectives(const std::vector<Group>& groups, std::mt19937_64& rng) {
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); };
  std::vector<Coll> colls;
  for (size_t g = 0; g < groups.size(); ++g) {
    const int n = static_cast<int>(groups[g].members.size());
    for (int type : caseTypes()) {  // occlCollSend: a send/recv pair
      for (int v = 0; v < kVariants; ++v) {
        Spec s;
        s.type = type;
        s.dtype = kDtypes[pick(std::size(kDtypes))];
        s.op = reducing(type) ? kOps[pick(std::size(kOps))] : occlSum;
        s.count = 1 + static_cast<size_t>(pick(static_cast<int>(kMaxCount)));
        s.inPlace = hasInPlace(type) && pick(2) == 1;
        s.root = pick(n);
        s.peer = (s.root + 1 + pick(n - 1)) % n;
        colls.push_back({g, s, nextCollId()});
      }
    }
  }
  return colls;
}

// Where global rank `rank` is in group g's communicator, or -1.
int localRank(const Group& g, int rank) {
  const auto at = std::find(g.members.begin(), g.members.end(), rank);
  return at == g.members.end() ? -1 : static_cast<int>(at - g.members.begin());
}

struct Soak {
  // This round's buffers, colls[k]'s in io[k] (by rank of its communicator). Declared before the
  // communicators, so they are freed after them: no daemon ever reads a freed buffer, even when a
  // round fails with submissions still pending.
  std::vector<std::vector<RankIo>> io;
  std::vector<Group> groups;
  std::vector<Coll> colls;
  uint64_t submitted = 0;

  // Global rank `rank`'s collectives (index into colls) with its rank in their communicators.
  std::vector<std::pair<size_t, int>> mine(int rank) const {
    std::vector<std::pair<size_t, int>> out;
    for (size_t k = 0; k < colls.size(); ++k) {
      const int local = localRank(groups[colls[k].group], rank);
      if (local >= 0 && participates(colls[k].spec, local)) out.emplace_back(k, local);
    }
    return out;
  }

  void registerAll() {
    runRanks(kRanks, [&](int rank) {
      for (const auto& [k, local] : mine(rank)) {
        const Coll& c = colls[k];
        const occlCollDesc_t d = descFor(c.spec, local);
        occlComm_t comm = (*groups[c.group].comms)[local];
        expectOk(occlCollRegister(comm, c.collId, &d), comm,
                 absl::StrFormat("%s: register %s", groups[c.group].name, describe(c.spec)));
      }
    });
  }

  // One round: fresh buffers, every rank submits its collectives in its own order and waits.
  void round(uint64_t seed) {
    io.clear();
    for (const Coll& c : colls) io.push_back(prepare(c.spec, static_cast<int>(groups[c.group].members.size())));
    runRanks(kRanks, [&](int rank) {
      std::vector<std::pair<size_t, int>> order = mine(rank);
      std::mt19937_64 rng(seed * 131 + static_cast<uint64_t>(rank));
      std::shuffle(order.begin(), order.end(), rng);
      CallbackCounter done;
      for (const auto& [k, local] : order) {
        const Coll& c = colls[k];
        occlComm_t comm = (*groups[c.group].comms)[local];
        RankIo& mineIo = io[k][static_cast<size_t>(local)];
        expectOk(occlSubmit(comm, c.collId, mineIo.send, mineIo.recv, &CallbackCounter::callback, done.arg()), comm,
                 absl::StrFormat("%s: submit %s", groups[c.group].name, describe(c.spec)));
      }
      if (!done.waitFor(order.size(), kRoundTimeout)) throw std::runtime_error(pendingReport(rank, order, done));
      for (const auto& [id, status] : done.fired())
        if (status != occlSuccess) throw std::runtime_error(absl::StrFormat("rank %d: collId 0x%x: %s", rank, id, occlGetErrorString(status)));
    });
    for (size_t k = 0; k < colls.size(); ++k) {
      for (size_t r = 0; r < io[k].size(); ++r) {
        const std::string bad = mismatch(colls[k].spec, static_cast<int>(r), io[k][r]);
        ASSERT_TRUE(bad.empty()) << groups[colls[k].group].name << ": " << bad;
      }
    }
    submitted += colls.size();  // a collective counts once, however many ranks take part
  }

  std::string pendingReport(int rank, const std::vector<std::pair<size_t, int>>& order, CallbackCounter& done) const {
    const auto fired = done.fired();
    std::vector<std::string> pending;
    for (const auto& [k, local] : order) {
      const bool seen = std::any_of(fired.begin(), fired.end(), [&](const auto& f) { return f.first == colls[k].collId; });
      if (!seen) pending.push_back(absl::StrFormat("%s 0x%x %s", groups[colls[k].group].name, colls[k].collId, describe(colls[k].spec)));
    }
    return absl::StrFormat("rank %d: %d of %d collectives did not complete within %d s: %s", rank, pending.size(),
                           order.size(), kRoundTimeout.count(), absl::StrJoin(pending, "; "));
  }
};

uint64_t envNumber(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 10) : fallback;
}

TEST(SoakTest, EightRanksThreeOverlappingCommunicatorSetsEveryTypeInRandomOrders) {
  const uint64_t target = envNumber("OCCL_SOAK_COLLECTIVES", 10000);
  const uint64_t seconds = envNumber("OCCL_SOAK_SECONDS", 0);
  const uint64_t seed = envNumber("OCCL_SOAK_SEED", 1);
  occlConfig_t config = testConfig();
  config.connectorSlotBytes = kSlotBytes;
  Soak soak;
  std::mt19937_64 rng(seed);
  soak.groups = makeGroups(config);
  soak.colls = drawCollectives(soak.groups, rng);
  ASSERT_NO_THROW(soak.registerAll());
  const auto start = Clock::now();
  uint64_t rounds = 0;
  auto more = [&] {
    if (seconds > 0) return Clock::now() - start < std::chrono::seconds(seconds);
    return soak.submitted < target;
  };
  while (more()) {
    ASSERT_NO_THROW(soak.round(seed * 1000003 + rounds)) << "round " << rounds;
    if (HasFatalFailure()) break;
    ++rounds;
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  uint64_t preemptions = 0;
  for (const Coll& c : soak.colls) {
    const Group& g = soak.groups[c.group];
    for (size_t r = 0; r < g.members.size(); ++r) {
      if (!participates(c.spec, static_cast<int>(r))) continue;
      occlCollStats_t st{};
      if (occlCollGetStats((*g.comms)[static_cast<int>(r)], c.collId, &st) == occlSuccess) preemptions += st.preemptions;
    }
  }
  std::printf("[soak] %llu collectives (%zu registered on %zu communicators, %llu rounds) in %.1f s: %.0f/s, "
              "%llu preemptions, seed %llu\n",
              static_cast<unsigned long long>(soak.submitted), soak.colls.size(), soak.groups.size(),
              static_cast<unsigned long long>(rounds), elapsed, static_cast<double>(soak.submitted) / elapsed,
              static_cast<unsigned long long>(preemptions), static_cast<unsigned long long>(seed));
}

}  // namespace
}  // namespace occl::test
