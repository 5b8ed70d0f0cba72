// Every rank's status as the other ranks see it, for "who is missing" (occlCommGetPending and
// the timeout messages, host/comm_pending.cpp).
//
// A rank's status is a small table of entries, a key and four words, that its owner fills from
// what it registered and submitted (a BoardSource, called every kBoardTickMs on a group thread,
// never on the submission path). The group gathers every rank's table in one place and answers
// queries from there: the bootstrap root for ranks that are processes (each leaf sends what
// changed since its last send, and an empty delta every kBoardKeepaliveMs when nothing did, so
// the root knows who went silent), the shared state of a thread group for occlCommInitAll's
// threads. An answer gives, per rank, each asked key's value and how long ago it last changed
// there, the entry that changed last, and how long ago the rank was last heard from.
//
// The tables are gathered, not replicated: a query costs one round trip to the root, and the
// traffic while nothing is asked is each rank's deltas to the root, O(ranks), not O(ranks^2).
// This file holds the parts every group shares: the table, the delta of a rank's side, and
// their wire form. It knows nothing of what the words mean.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "util/status.hpp"

namespace occl::bootstrap {

inline constexpr int64_t kBoardTickMs = 50;        // a rank's table is read and sent this often
inline constexpr int64_t kBoardKeepaliveMs = 250;  // "still here" when nothing changed
// Heard from less recently than this: the rank is silent (stopped, hung, or its host starved).
inline constexpr int64_t kBoardSilentMs = 4 * kBoardKeepaliveMs;

struct BoardEntry {
  uint64_t key = 0;
  std::array<uint64_t, 4> value{};
  bool operator==(const BoardEntry&) const = default;
};
static_assert(sizeof(BoardEntry) == 40, "the wire form is the struct's bytes");

// Fills `out` (cleared by the caller) with this rank's whole table. Returns false when it cannot
// now (a lock it only tries is held): the rank's table then stays as last sent.
using BoardSource = std::function<bool(std::vector<BoardEntry>& out)>;

// What changed in one rank's table.
struct BoardDelta {
  std::vector<BoardEntry> set;   // new or changed entries
  std::vector<uint64_t> erased;  // keys gone
  bool empty() const { return set.empty() && erased.empty(); }
};

// A rank's side: what it last sent, so that it sends only the difference.
class BoardSender {
 public:
  BoardDelta diff(const std::vector<BoardEntry>& now);

 private:
  absl::flat_hash_map<uint64_t, std::array<uint64_t, 4>> sent_;
};

// One rank in a query's answer.
struct RankBoard {
  int64_t silentMs = -1;  // since the rank was last heard from; -1: not tracked (thread ranks)
  struct Item {
    bool present = false;
    std::array<uint64_t, 4> value{};
    int64_t changedAgoMs = -1;
  };
  std::vector<Item> items;  // one per asked key, in the order asked
  bool hasNewest = false;   // the entry that changed last, and when
  BoardEntry newest;
  int64_t newestAgoMs = -1;
};

struct BoardView {
  // False: the tables could not be read (the root did not answer); `ranks` then holds only what
  // this rank knows by itself, the root's silence (ranks[0].silentMs).
  bool answered = false;
  std::vector<RankBoard> ranks;
};

// The steady clock in milliseconds: the times the tables below keep.
int64_t boardNowMs();

// The gathered tables. Not thread-safe: its owner locks. Times are the owner's boardNowMs().
class BoardTable {
 public:
  explicit BoardTable(int nRanks);
  // Rank `rank`'s whole table is now `entries` (a local source).
  void replace(int rank, const std::vector<BoardEntry>& entries, int64_t nowMs);
  void apply(int rank, const BoardDelta& delta, int64_t nowMs);
  void heard(int rank, int64_t nowMs);
  // `tracked`: whether silence means anything (processes); a rank is never silent to itself.
  BoardView query(std::span<const uint64_t> keys, int64_t nowMs, bool tracked, int self) const;

 private:
  struct Slot {
    std::array<uint64_t, 4> value;
    int64_t changedMs;
  };
  struct Rank {
    absl::flat_hash_map<uint64_t, Slot> entries;
    int64_t heardMs = -1;
    uint64_t newestKey = 0;
    int64_t newestMs = -1;
  };
  void set(Rank& r, const BoardEntry& e, int64_t nowMs);
  std::vector<Rank> ranks_;
};

// Wire forms (little-endian hosts, as the rest of the bootstrap): a delta; a query (an id and
// the keys); an answer (the id and the view).
std::vector<char> encodeDelta(const BoardDelta& delta);
Result<BoardDelta> decodeDelta(std::span<const char> bytes);
std::vector<char> encodeQuery(uint64_t id, std::span<const uint64_t> keys);
Result<std::pair<uint64_t, std::vector<uint64_t>>> decodeQuery(std::span<const char> bytes);
std::vector<char> encodeView(uint64_t id, const BoardView& view);
// `nKeys` and `nRanks`: what the asker expects, checked.
Result<std::pair<uint64_t, BoardView>> decodeView(std::span<const char> bytes, size_t nKeys, int nRanks);

}  // namespace occl::bootstrap
