// Who is missing, live (occlCommGetPending, and the message of a submission that timed out):
// each rank's status table on the group's board (bootstrap/status_board.hpp) holds, per
// registered collId, its signature and how many submissions the rank made; a pending submission
// waits on a peer that has not registered it alike or not made it yet, or that went silent.
#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "device/coll_types.hpp"
#include "host/comm.hpp"
#include "device/dtypes.hpp"

namespace occl::host {
namespace {

// A query for a timeout message or occlCommGetPending waits this long for the root's answer.
constexpr int64_t kBoardQueryMs = 300;
// occlCommGetPending looks at this many pending submissions at most.
constexpr size_t kMaxPendingLooked = 4096;
// A timeout's message names this many rows, then says how many more there are.
constexpr size_t kMaxRowsNamed = 6;

// The board's words for one registration: {type, datatype, op, root}, count, submissions made,
// the algorithm asked for. Every field a peer must register alike, except the connector geometry
// (which attachConnector compares where both ends meet).
uint64_t signatureWord(const occlCollDesc_t& d) {
  return static_cast<uint64_t>(static_cast<uint8_t>(d.type)) | static_cast<uint64_t>(static_cast<uint8_t>(d.datatype)) << 8 |
         static_cast<uint64_t>(static_cast<uint8_t>(d.op)) << 16 | static_cast<uint64_t>(static_cast<uint32_t>(d.root)) << 32;
}
int typeOf(uint64_t w) { return static_cast<int>(w & 0xff); }
int datatypeOf(uint64_t w) { return static_cast<int>((w >> 8) & 0xff); }
int opOf(uint64_t w) { return static_cast<int>((w >> 16) & 0xff); }
int rootOf(uint64_t w) { return static_cast<int>(static_cast<uint32_t>(w >> 32)); }

const CollTypeInfo* typeInfo(int type) { return isCollType(type) ? &collInfo(type) : nullptr; }

std::string describeSignature(uint64_t sig, uint64_t count) {
  const CollTypeInfo* info = typeInfo(typeOf(sig));
  std::string text = absl::StrFormat("%s of %d %s", info != nullptr ? info->name : "an unknown collective", count,
                                     dtypeName(datatypeOf(sig)));
  if (info != nullptr && info->rooted) absl::StrAppend(&text, absl::StrFormat(", root %d", rootOf(sig)));
  if (info != nullptr && info->pointToPoint) absl::StrAppend(&text, absl::StrFormat(", peer %d", rootOf(sig)));
  return text;
}

std::string describeMs(int64_t ms) { return ms < 10000 ? absl::StrFormat("%d ms", ms) : absl::StrFormat("%.1f s", ms / 1000.0); }

}  // namespace

bootstrap::BoardEntry Comm::boardEntry(const Collective& c) {
  const occlCollDesc_t& d = c.userDesc();
  return bootstrap::BoardEntry{c.collId(),
                               {signatureWord(d), static_cast<uint64_t>(d.count), c.nextSeq(),
                                c.requestedAlgorithmHash()}};
}

bool Comm::fillBoard(std::vector<bootstrap::BoardEntry>& out) {
  // On the group's thread, which also watches for dead peers: it never waits for a submitter.
  std::unique_lock<std::mutex> lock(submitMu_, std::try_to_lock);
  if (!lock.owns_lock()) return false;
  out.reserve(registry_.size());
  for (const auto& [collId, c] : registry_) out.push_back(boardEntry(*c));
  return true;
}

// What `mine` expects of peer p's registration under the same collId, given p's words.
static bool registeredAlike(const bootstrap::BoardEntry& mine, int me, int peer, const std::array<uint64_t, 4>& theirs) {
  const uint64_t sig = mine.value[0];
  const CollTypeInfo* info = typeInfo(typeOf(sig));
  if (theirs[1] != mine.value[1] || datatypeOf(theirs[0]) != datatypeOf(sig) || theirs[3] != mine.value[3]) return false;
  if (info != nullptr && info->pointToPoint) {
    const int other = typeOf(sig) == occlCollSend ? occlCollRecv : occlCollSend;
    return typeOf(theirs[0]) == other && rootOf(theirs[0]) == me && rootOf(sig) == peer;
  }
  if (typeOf(theirs[0]) != typeOf(sig)) return false;
  if (info != nullptr && info->reduces && opOf(theirs[0]) != opOf(sig)) return false;
  return info == nullptr || !info->rooted || rootOf(theirs[0]) == rootOf(sig);
}

std::vector<Comm::Wait> Comm::waitsOf(const std::vector<Waiting>& pending) {
  std::vector<Wait> out;
  if (pending.empty()) return out;
  std::vector<uint64_t> keys;
  absl::flat_hash_map<uint64_t, size_t> keyIndex;
  for (const Waiting& w : pending)
    if (keyIndex.try_emplace(w.entry.key, keys.size()).second) keys.push_back(w.entry.key);
  const bootstrap::BoardView view = setupGroup().queryBoard(keys, kBoardQueryMs);

  for (const Waiting& w : pending) {
    const uint64_t collId = w.entry.key;
    const size_t k = keyIndex.at(collId);
    const auto row = [&](int peer, occlWaitReason_t reason) {
      occlPendingWait_t r{};
      r.collId = collId;
      r.seq = w.seq;
      r.peer = peer;
      r.reason = reason;
      r.peerLastAgoMs = -1;
      r.peerSilentMs = -1;
      if (peer >= 0 && static_cast<size_t>(peer) < view.ranks.size()) {
        const bootstrap::RankBoard& b = view.ranks[static_cast<size_t>(peer)];
        r.peerSilentMs = b.silentMs;
        if (b.hasNewest) {
          r.peerLastCollId = b.newest.key;
          r.peerLastCount = b.newest.value[2];
          r.peerLastAgoMs = b.newestAgoMs;
        }
      }
      return r;
    };
    if (!view.answered) {
      const int64_t rootSilent = view.ranks.empty() ? -1 : view.ranks[0].silentMs;
      const bool rootQuiet = rootSilent >= bootstrap::kBoardSilentMs;
      out.push_back(Wait{row(rootQuiet ? 0 : -1, occlWaitUnknown),
                         rootQuiet ? absl::StrFormat("rank 0, the bootstrap root that gathers every rank's status, "
                                                     "did not answer within %d ms and has been silent for %s",
                                                     kBoardQueryMs, describeMs(rootSilent))
                                   : "who is missing is unknown: the ranks' status could not be read (the "
                                     "communicator failed, or the bootstrap root is busy)"});
      continue;
    }
    const CollTypeInfo* info = typeInfo(typeOf(w.entry.value[0]));
    std::vector<int> peers;
    if (info != nullptr && info->pointToPoint) {
      peers.push_back(rootOf(w.entry.value[0]));
    } else {
      for (int p = 0; p < nRanks_; ++p)
        if (p != rank_) peers.push_back(p);
    }
    const size_t before = out.size();
    for (int p : peers) {
      if (p < 0 || static_cast<size_t>(p) >= view.ranks.size()) continue;
      const bootstrap::RankBoard& b = view.ranks[static_cast<size_t>(p)];
      const bootstrap::RankBoard::Item& item = b.items[k];
      const bool silent = b.silentMs >= bootstrap::kBoardSilentMs;
      std::string why;
      occlPendingWait_t r;
      if (!item.present) {
        r = row(p, occlWaitNotRegistered);
        why = absl::StrFormat("rank %d has not registered collId 0x%x", p, collId);
      } else if (!registeredAlike(w.entry, rank_, p, item.value)) {
        r = row(p, occlWaitMismatch);
        why = absl::StrFormat("rank %d registered collId 0x%x as %s%s, this rank as %s", p, collId,
                              describeSignature(item.value[0], item.value[1]),
                              item.value[3] != w.entry.value[3] ? " with another algorithm" : "",
                              describeSignature(w.entry.value[0], w.entry.value[1]));
      } else if (item.value[2] <= w.seq) {
        r = row(p, occlWaitNotSubmitted);
        r.peerSubmitted = item.value[2];
        why = absl::StrFormat("rank %d has not submitted it (%d submission%s of collId 0x%x so far)", p, item.value[2],
                              item.value[2] == 1 ? "" : "s", collId);
      } else if (silent) {
        r = row(p, occlWaitSilent);
        r.peerSubmitted = item.value[2];
        why = absl::StrFormat("rank %d submitted it but has been silent for %s (stopped or hung?)", p,
                              describeMs(b.silentMs));
      } else {
        continue;
      }
      if (r.reason != occlWaitSilent && silent) absl::StrAppend(&why, absl::StrFormat("; silent for %s", describeMs(b.silentMs)));
      if (r.peerLastAgoMs >= 0 && r.reason != occlWaitSilent) {
        absl::StrAppend(&why, absl::StrFormat("; its last change: collId 0x%x (%s) at %d submission%s, %s ago",
                                              r.peerLastCollId, describeSignature(b.newest.value[0], b.newest.value[1]),
                                              r.peerLastCount, r.peerLastCount == 1 ? "" : "s",
                                              describeMs(r.peerLastAgoMs)));
      }
      out.push_back(Wait{r, std::move(why)});
    }
    if (out.size() == before)
      out.push_back(Wait{row(-1, occlWaitInFlight), "every rank has submitted it: it is under way (its data in flight, or a gate not yet open)"});
  }
  return out;
}

Result<std::vector<occlPendingWait_t>> Comm::pendingWaits() {
  std::vector<Waiting> pending;
  {
    std::lock_guard<std::mutex> lock(submitMu_);
    for (const auto& [collId, c] : registry_) {
      const bootstrap::BoardEntry entry = boardEntry(*c);
      for (uint64_t seq = c->completedSeq(); seq < c->nextSeq() && pending.size() < kMaxPendingLooked; ++seq)
        pending.push_back(Waiting{entry, seq});
    }
  }
  std::sort(pending.begin(), pending.end(), [](const Waiting& a, const Waiting& b) {
    return a.entry.key != b.entry.key ? a.entry.key < b.entry.key : a.seq < b.seq;
  });
  std::vector<occlPendingWait_t> rows;
  for (Wait& w : waitsOf(pending)) rows.push_back(w.row);
  return rows;
}

std::string Comm::describeWaits(const Waiting& failed) {
  const std::vector<Wait> waits = waitsOf({failed});
  std::vector<std::string> parts;
  for (size_t i = 0; i < waits.size() && i < kMaxRowsNamed; ++i) parts.push_back(waits[i].text);
  if (waits.size() > kMaxRowsNamed) parts.push_back(absl::StrFormat("and %d more", waits.size() - kMaxRowsNamed));
  return absl::StrJoin(parts, "; ");
}

}  // namespace occl::host
