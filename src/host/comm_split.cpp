// Children of a communicator: occlCommSplit meets through the parent's group (no new rendezvous
// of the user's), occlCommShrink through the lowest survivor's spare rendezvous; both build the
// child with comm_setup.hpp's builders (docs/design.md, "Building a communicator" and "Revoke and shrink").
#include "host/comm_split.hpp"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bootstrap/bootstrap.hpp"
#include "bootstrap/thread_group.hpp"
#include "host/comm_setup.hpp"
#include "host/config.hpp"
#include "transport/in_process/setup.hpp"
#include "util/fnv1a.hpp"

namespace occl::host {
namespace {

// What a split's child needs beside its colour: its ranks in the parent, ordered by key.
struct SplitRequest {
  int32_t color;
  int32_t key;
  int32_t device;
  int32_t valid;  // 0: this rank's arguments were bad (it reports why; the others name it)
};
static_assert(std::is_trivially_copyable_v<SplitRequest>);

// What the new rank 0 of each child hands its other ranks through the parent.
struct SplitHandoff {
  bootstrap::UniqueIdData id;  // a TCP parent: the child's bootstrap id
  uint64_t kit = 0;            // a thread parent: a ThreadKit* of this process
  int32_t ready = 0;           // 0: the new rank 0 could not make them
  int32_t reserved = 0;
};
static_assert(std::is_trivially_copyable_v<SplitHandoff>);

// A child of thread ranks: each rank's member of the child's group and connector factory, made by
// the child's rank 0 and taken by each rank (its own slot only) before the parent's barrier.
struct ThreadKit {
  std::vector<std::unique_ptr<bootstrap::Group>> groups;
  std::vector<std::unique_ptr<transport::ConnectorFactory>> connectors;
  bool anyCuda = false;
};

// Where a rank of `parent` runs, as a config backend can name it.
int backendOf(const Comm& parent) {
  if (parent.device() >= 0) return occlBackendCuda;
  return parent.requestedConfig().backend == occlBackendSimt ? occlBackendSimt : occlBackendHost;
}

// This rank's split arguments: the config the child gets, or why not.
Result<occlConfig_t> childConfig(const Comm& parent, int color, const occlConfig_t* config) {
  if (color < 0 && color != OCCL_SPLIT_NOCOLOR)
    return Status::error(occlInvalidArgument, absl::StrFormat("color = %d: expected >= 0, or OCCL_SPLIT_NOCOLOR (%d)",
                                                              color, OCCL_SPLIT_NOCOLOR));
  occlConfig_t c = config != nullptr ? *config : parent.requestedConfig();
  if (Status s = validateConfig(c); !s.ok()) return s;
  const int where = backendOf(parent);
  if (c.backend != occlBackendAuto && c.backend != where)
    return Status::error(occlInvalidArgument,
                         absl::StrFormat("config.backend = %s, but the parent's ranks run on %s: a child runs where its "
                                         "parent does (pass auto)",
                                         backendName(c.backend), backendName(where)));
  c.backend = where;
  return c;
}

}  // namespace

namespace {

// The split of `group`'s ranks (the parent's, or for a shrink of thread ranks the survivors'):
// `mine` is this rank's config for the child or why its arguments were bad; `overTcp`: the child
// meets through a new TCP bootstrap, else through a thread group of this process; `what` names
// the call in messages.
Result<std::unique_ptr<Comm>> splitOver(bootstrap::Group& group, bool overTcp, const Comm& parent, int color, int key,
                                        const Result<occlConfig_t>& mine, const char* what) {
  const int n = group.size(), rank = group.rank();
  std::vector<SplitRequest> requests(static_cast<size_t>(n));
  requests[static_cast<size_t>(rank)] = SplitRequest{color, key, parent.device(), mine.ok() ? 1 : 0};
  if (Status s = group.allGather(requests.data(), sizeof(SplitRequest)); !s.ok())
    return s.withContext(absl::StrCat(what, ": gathering every rank's color and key"));
  if (!mine.ok()) return mine.status().withContext(what);
  for (int r = 0; r < n; ++r)
    if (requests[static_cast<size_t>(r)].valid == 0)
      return Status::error(occlInvalidArgument,
                           absl::StrFormat("%s: rank %d passed an invalid argument (its error says which)", what, r));

  // The child's ranks in the parent, in their new order.
  std::vector<int> members;
  if (color != OCCL_SPLIT_NOCOLOR) {
    for (int r = 0; r < n; ++r)
      if (requests[static_cast<size_t>(r)].color == color) members.push_back(r);
    std::stable_sort(members.begin(), members.end(), [&](int a, int b) {
      return requests[static_cast<size_t>(a)].key < requests[static_cast<size_t>(b)].key;
    });
  }
  const auto at = std::find(members.begin(), members.end(), rank);
  const int newRank = static_cast<int>(at - members.begin());
  const int newSize = static_cast<int>(members.size());

  // The new rank 0 makes what its child meets through and hands it over.
  std::vector<SplitHandoff> handoffs(static_cast<size_t>(n));
  std::unique_ptr<ThreadKit> kit;
  Status made = Status::success();
  if (color != OCCL_SPLIT_NOCOLOR && newRank == 0) {
    SplitHandoff& h = handoffs[static_cast<size_t>(rank)];
    if (overTcp) {
      Result<bootstrap::UniqueIdData> id = bootstrap::createUniqueId();
      if (id.ok()) h.id = id.value();
      made = id.status();
    } else {
      kit = std::make_unique<ThreadKit>();
      std::vector<int> devices;
      for (int r : members) devices.push_back(requests[static_cast<size_t>(r)].device);
      kit->anyCuda = std::any_of(devices.begin(), devices.end(), [](int d) { return d >= 0; });
      kit->groups = bootstrap::makeThreadGroup(newSize, mine.value().initTimeoutMs);
      auto connectors = transport::in_process::connectorsFor(devices);
      for (int r = 0; r < newSize; ++r) kit->connectors.push_back(connectors());
      h.kit = reinterpret_cast<uint64_t>(kit.get());
    }
    h.ready = made.ok() ? 1 : 0;
  }
  if (Status s = group.allGather(handoffs.data(), sizeof(SplitHandoff)); !s.ok())
    return s.withContext(absl::StrCat(what, ": handing each child's rendezvous to its ranks"));
  if (!made.ok()) return made.withContext(absl::StrCat(what, ": making the child's rendezvous"));
  const SplitHandoff* handoff = color != OCCL_SPLIT_NOCOLOR ? &handoffs[static_cast<size_t>(members.front())] : nullptr;
  std::unique_ptr<bootstrap::Group> childGroup;
  std::unique_ptr<transport::ConnectorFactory> childConnectors;
  bool anyCuda = false;
  if (handoff != nullptr && handoff->ready != 0 && !overTcp) {
    auto* theirs = reinterpret_cast<ThreadKit*>(handoff->kit);
    childGroup = std::move(theirs->groups[static_cast<size_t>(newRank)]);
    childConnectors = std::move(theirs->connectors[static_cast<size_t>(newRank)]);
    anyCuda = theirs->anyCuda;
  }
  // Every rank has taken its part of the kits: their makers may let them go.
  if (Status s = group.barrier(); !s.ok()) return s.withContext(absl::StrCat(what, ": waiting for every rank's handoff"));
  kit.reset();
  if (color == OCCL_SPLIT_NOCOLOR) return std::unique_ptr<Comm>();
  if (handoff->ready == 0)
    return Status::error(occlRemoteError, absl::StrFormat("%s: rank %d, the new rank 0 of color %d, could not make "
                                                          "the child's rendezvous",
                                                          what, members.front(), color));
  Result<std::unique_ptr<Comm>> child = [&]() -> Result<std::unique_ptr<Comm>> {
    if (!overTcp) return buildThreadRank(std::move(childGroup), mine.value(), parent.device(), anyCuda,
                                         std::move(childConnectors));
    Result<std::unique_ptr<bootstrap::Bootstrap>> boot =
        bootstrap::Bootstrap::connect(handoff->id, newRank, newSize, mine.value().initTimeoutMs);
    if (!boot.ok()) return boot.status();
    return buildOverBootstrap(std::move(boot.value()), mine.value(), parent.device());
  }();
  if (!child.ok())
    return child.status().withContext(absl::StrFormat("%s: color %d, new rank %d of %d", what, color, newRank, newSize));
  return child;
}

}  // namespace

Result<std::unique_ptr<Comm>> split(Comm& parent, int color, int key, const occlConfig_t* config) {
  return splitOver(parent.setupGroup(), parent.bootstrapped(), parent, color, key, childConfig(parent, color, config),
                   "occlCommSplit");
}

namespace {

// A shrink of ranks that are processes: the survivors meet at the lowest one's spare rendezvous
// and check that they all excluded the same ranks.
Result<std::unique_ptr<Comm>> shrinkOverTcp(const Comm& parent, const std::vector<int>& survivors,
                                            const std::vector<bool>& excluded, const occlConfig_t& cfg) {
  const int newRank =
      static_cast<int>(std::find(survivors.begin(), survivors.end(), parent.rank()) - survivors.begin());
  const int newSize = static_cast<int>(survivors.size());
  const bootstrap::UniqueIdData& id = parent.spareIds()[static_cast<size_t>(survivors.front())];
  if (id.magicVersion == 0)
    return Status::error(occlRemoteError, absl::StrFormat("occlCommShrink: rank %d, the shrunk communicator's new rank "
                                                          "0, could not listen for it when this communicator was made",
                                                          survivors.front()));
  const std::string who = absl::StrFormat("occlCommShrink (new rank %d of %d, meeting at rank %d)", newRank, newSize,
                                          survivors.front());
  Result<std::unique_ptr<bootstrap::Bootstrap>> boot = bootstrap::Bootstrap::connect(id, newRank, newSize, cfg.initTimeoutMs);
  if (!boot.ok()) return boot.status().withContext(who);
  // Every survivor must have excluded the same ranks: a rank one survivor kept and another
  // excluded would make two communicators of different members.
  std::vector<uint64_t> agreed(static_cast<size_t>(newSize));
  Fnv1a hash;
  for (bool e : excluded) hash.add(e ? uint8_t{1} : uint8_t{0});
  agreed[static_cast<size_t>(newRank)] = hash.value();
  if (Status s = boot.value()->allGather(agreed.data(), sizeof(uint64_t)); !s.ok()) return s.withContext(who);
  for (int r = 0; r < newSize; ++r)
    if (agreed[static_cast<size_t>(r)] != agreed[static_cast<size_t>(newRank)])
      return Status::error(occlInvalidUsage,
                           absl::StrFormat("%s: rank %d excluded other ranks than this one (every survivor must pass "
                                           "the same excludeRanksList)",
                                           who, survivors[static_cast<size_t>(r)]));
  Result<std::unique_ptr<Comm>> child = buildOverBootstrap(std::move(boot.value()), cfg, parent.device());
  if (!child.ok()) return child.status().withContext(who);
  return child;
}

// A shrink of the threads of one process: the survivors meet as a subgroup of the parent's thread
// group (ranks that passed another list meet another one, which times out naming who never came),
// then split it as occlCommSplit does, all with one color, in their order.
Result<std::unique_ptr<Comm>> shrinkThreads(const Comm& parent, const std::vector<int>& survivors,
                                            const occlConfig_t& cfg) {
  Result<std::unique_ptr<bootstrap::Group>> group =
      bootstrap::threadSubgroup(parent.setupGroup(), survivors, cfg.initTimeoutMs);
  if (!group.ok()) return group.status();
  return splitOver(*group.value(), /*overTcp=*/false, parent, 0, group.value()->rank(), cfg, "occlCommShrink");
}

}  // namespace

Result<std::unique_ptr<Comm>> shrink(Comm& parent, const int* excludeRanks, int excludeCount,
                                     const occlConfig_t* config, int flags) {
  const int n = parent.size(), rank = parent.rank();
  if (flags != OCCL_SHRINK_DEFAULT && flags != OCCL_SHRINK_ABORT)
    return Status::error(occlInvalidArgument, absl::StrFormat("shrinkFlags = %d: expected OCCL_SHRINK_DEFAULT (%d) or "
                                                              "OCCL_SHRINK_ABORT (%d)",
                                                              flags, OCCL_SHRINK_DEFAULT, OCCL_SHRINK_ABORT));
  if (excludeCount < 0 || excludeCount >= n)
    return Status::error(occlInvalidArgument, absl::StrFormat("excludeRanksCount = %d: expected 0..%d (this "
                                                              "communicator has %d ranks, this one stays)",
                                                              excludeCount, n - 1, n));
  if (excludeCount > 0 && excludeRanks == nullptr)
    return Status::error(occlInvalidArgument,
                         absl::StrFormat("excludeRanksList is NULL with excludeRanksCount = %d", excludeCount));
  std::vector<bool> excluded(static_cast<size_t>(n), false);
  for (int i = 0; i < excludeCount; ++i) {
    const int r = excludeRanks[i];
    if (r < 0 || r >= n)
      return Status::error(occlInvalidArgument, absl::StrFormat("excludeRanksList[%d] = %d: expected a rank 0..%d", i,
                                                                r, n - 1));
    if (r == rank)
      return Status::error(occlInvalidArgument,
                           absl::StrFormat("excludeRanksList[%d] = %d is this rank: an excluded rank does not call "
                                           "occlCommShrink",
                                           i, r));
    if (excluded[static_cast<size_t>(r)])
      return Status::error(occlInvalidArgument, absl::StrFormat("excludeRanksList names rank %d twice", r));
    excluded[static_cast<size_t>(r)] = true;
  }
  Result<occlConfig_t> cfg = childConfig(parent, 0, config);
  if (!cfg.ok()) return cfg.status();
  if (flags == OCCL_SHRINK_DEFAULT) {
    if (const uint64_t pending = parent.pendingSubmissions(); pending != 0)
      return Status::error(occlInvalidUsage,
                           absl::StrFormat("%d submission(s) are pending: wait for them (occlCommWaitAll), or pass "
                                           "OCCL_SHRINK_ABORT to fail them",
                                           pending));
  } else if (!parent.revoked()) {
    if (Status s = parent.revoke(); !s.ok()) return s.withContext("occlCommShrink: revoking the parent");
  }
  std::vector<int> survivors;
  for (int r = 0; r < n; ++r)
    if (!excluded[static_cast<size_t>(r)]) survivors.push_back(r);
  const int newRank = static_cast<int>(std::find(survivors.begin(), survivors.end(), rank) - survivors.begin());
  Result<std::unique_ptr<Comm>> child = parent.bootstrapped()
                                            ? shrinkOverTcp(parent, survivors, excluded, cfg.value())
                                            : shrinkThreads(parent, survivors, cfg.value());
  if (!child.ok()) return child.status();
  const std::string who = absl::StrFormat("occlCommShrink (new rank %d of %d)", newRank, static_cast<int>(survivors.size()));
  // What does not depend on the rank count goes along: AllReduce with the built-in algorithms,
  // and the PreMulSum ops their registrations may name.
  child.value()->preMulSumOps().adopt(parent.preMulSumOps().snapshot());
  for (const Comm::Registration& reg : parent.registrations()) {
    if (!carriedByShrink(reg.desc, reg.algorithm)) continue;
    occlCollDesc_t d = reg.desc;
    d.algorithm = reg.algorithm.empty() ? nullptr : reg.algorithm.c_str();
    if (Status s = child.value()->registerCollective(reg.collId, d); !s.ok())
      return s.withContext(absl::StrFormat("%s: registering collId 0x%x again", who, reg.collId));
  }
  return child;
}

bool carriedByShrink(const occlCollDesc_t& desc, const std::string& algorithm) {
  return desc.type == occlCollAllReduce && (algorithm.empty() || algorithm == "ring");
}
}  // namespace occl::host
