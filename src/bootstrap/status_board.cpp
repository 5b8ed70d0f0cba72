#include "bootstrap/status_board.hpp"

#include <chrono>
#include <cstring>
#include <type_traits>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"

namespace occl::bootstrap {
namespace {

class Writer {
 public:
  template <typename T>
  void put(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto* p = reinterpret_cast<const char*>(&v);
    out_.insert(out_.end(), p, p + sizeof(T));
  }
  std::vector<char> take() { return std::move(out_); }

 private:
  std::vector<char> out_;
};

class Reader {
 public:
  explicit Reader(std::span<const char> in) : in_(in) {}
  template <typename T>
  bool get(T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (in_.size() - at_ < sizeof(T)) return false;
    std::memcpy(&v, in_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return true;
  }
  // A count of items of `itemBytes` each that the rest of the input can hold.
  bool count(uint64_t& n, size_t itemBytes) { return get(n) && n <= (in_.size() - at_) / itemBytes; }
  bool done() const { return at_ == in_.size(); }

 private:
  std::span<const char> in_;
  size_t at_ = 0;
};

Status malformed(const char* what) {
  return Status::error(occlInternalError, absl::StrFormat("a malformed status-board %s arrived", what));
}

}  // namespace

int64_t boardNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

BoardDelta BoardSender::diff(const std::vector<BoardEntry>& now) {
  BoardDelta d;
  absl::flat_hash_map<uint64_t, std::array<uint64_t, 4>> next;
  next.reserve(now.size());
  for (const BoardEntry& e : now) {
    next[e.key] = e.value;
    auto it = sent_.find(e.key);
    if (it == sent_.end() || it->second != e.value) d.set.push_back(e);
  }
  for (const auto& [key, value] : sent_)
    if (!next.contains(key)) d.erased.push_back(key);
  sent_ = std::move(next);
  return d;
}

BoardTable::BoardTable(int nRanks) : ranks_(static_cast<size_t>(nRanks)) {}

void BoardTable::set(Rank& r, const BoardEntry& e, int64_t nowMs) {
  auto [it, fresh] = r.entries.try_emplace(e.key, Slot{e.value, nowMs});
  if (!fresh) {
    if (it->second.value == e.value) return;
    it->second = Slot{e.value, nowMs};
  }
  r.newestKey = e.key;
  r.newestMs = nowMs;
}

void BoardTable::replace(int rank, const std::vector<BoardEntry>& entries, int64_t nowMs) {
  Rank& r = ranks_[static_cast<size_t>(rank)];
  absl::flat_hash_set<uint64_t> keep;
  for (const BoardEntry& e : entries) {
    set(r, e, nowMs);
    keep.insert(e.key);
  }
  absl::erase_if(r.entries, [&](const auto& kv) { return !keep.contains(kv.first); });
  r.heardMs = nowMs;
}

void BoardTable::apply(int rank, const BoardDelta& delta, int64_t nowMs) {
  Rank& r = ranks_[static_cast<size_t>(rank)];
  for (const BoardEntry& e : delta.set) set(r, e, nowMs);
  for (uint64_t key : delta.erased) r.entries.erase(key);
  r.heardMs = nowMs;
}

void BoardTable::heard(int rank, int64_t nowMs) { ranks_[static_cast<size_t>(rank)].heardMs = nowMs; }

BoardView BoardTable::query(std::span<const uint64_t> keys, int64_t nowMs, bool tracked, int self) const {
  BoardView view;
  view.answered = true;
  view.ranks.resize(ranks_.size());
  for (size_t i = 0; i < ranks_.size(); ++i) {
    const Rank& r = ranks_[i];
    RankBoard& out = view.ranks[i];
    if (static_cast<int>(i) == self) {
      out.silentMs = 0;
    } else if (tracked) {
      out.silentMs = r.heardMs < 0 ? -1 : nowMs - r.heardMs;
    }
    out.items.resize(keys.size());
    for (size_t k = 0; k < keys.size(); ++k) {
      auto it = r.entries.find(keys[k]);
      if (it == r.entries.end()) continue;
      out.items[k] = RankBoard::Item{true, it->second.value, nowMs - it->second.changedMs};
    }
    if (auto it = r.entries.find(r.newestKey); r.newestMs >= 0 && it != r.entries.end()) {
      out.hasNewest = true;
      out.newest = BoardEntry{r.newestKey, it->second.value};
      out.newestAgoMs = nowMs - r.newestMs;
    }
  }
  return view;
}

std::vector<char> encodeDelta(const BoardDelta& delta) {
  Writer w;
  w.put(uint64_t{delta.set.size()});
  for (const BoardEntry& e : delta.set) w.put(e);
  w.put(uint64_t{delta.erased.size()});
  for (uint64_t key : delta.erased) w.put(key);
  return w.take();
}

Result<BoardDelta> decodeDelta(std::span<const char> bytes) {
  Reader r(bytes);
  BoardDelta d;
  uint64_t n = 0;
  if (!r.count(n, sizeof(BoardEntry))) return malformed("delta");
  d.set.resize(n);
  for (BoardEntry& e : d.set) r.get(e);
  if (!r.count(n, sizeof(uint64_t))) return malformed("delta");
  d.erased.resize(n);
  for (uint64_t& key : d.erased) r.get(key);
  if (!r.done()) return malformed("delta");
  return d;
}

std::vector<char> encodeQuery(uint64_t id, std::span<const uint64_t> keys) {
  Writer w;
  w.put(id);
  w.put(uint64_t{keys.size()});
  for (uint64_t key : keys) w.put(key);
  return w.take();
}

Result<std::pair<uint64_t, std::vector<uint64_t>>> decodeQuery(std::span<const char> bytes) {
  Reader r(bytes);
  uint64_t id = 0, n = 0;
  if (!r.get(id) || !r.count(n, sizeof(uint64_t))) return malformed("query");
  std::vector<uint64_t> keys(n);
  for (uint64_t& key : keys) r.get(key);
  if (!r.done()) return malformed("query");
  return std::make_pair(id, std::move(keys));
}

std::vector<char> encodeView(uint64_t id, const BoardView& view) {
  Writer w;
  w.put(id);
  w.put(uint8_t{view.answered});
  w.put(uint64_t{view.ranks.size()});
  for (const RankBoard& r : view.ranks) {
    w.put(r.silentMs);
    w.put(uint64_t{r.items.size()});
    for (const RankBoard::Item& item : r.items) {
      w.put(uint8_t{item.present});
      w.put(item.value);
      w.put(item.changedAgoMs);
    }
    w.put(uint8_t{r.hasNewest});
    w.put(r.newest);
    w.put(r.newestAgoMs);
  }
  return w.take();
}

Result<std::pair<uint64_t, BoardView>> decodeView(std::span<const char> bytes, size_t nKeys, int nRanks) {
  Reader r(bytes);
  uint64_t id = 0, n = 0;
  uint8_t flag = 0;
  BoardView view;
  if (!r.get(id) || !r.get(flag) || !r.get(n) || n != static_cast<uint64_t>(nRanks)) return malformed("answer");
  view.answered = flag != 0;
  view.ranks.resize(n);
  for (RankBoard& rank : view.ranks) {
    uint64_t items = 0;
    if (!r.get(rank.silentMs) || !r.get(items) || items != nKeys) return malformed("answer");
    rank.items.resize(items);
    for (RankBoard::Item& item : rank.items) {
      if (!r.get(flag) || !r.get(item.value) || !r.get(item.changedAgoMs)) return malformed("answer");
      item.present = flag != 0;
    }
    if (!r.get(flag) || !r.get(rank.newest) || !r.get(rank.newestAgoMs)) return malformed("answer");
    rank.hasNewest = flag != 0;
  }
  if (!r.done()) return malformed("answer");
  return std::make_pair(id, std::move(view));
}

}  // namespace occl::bootstrap
