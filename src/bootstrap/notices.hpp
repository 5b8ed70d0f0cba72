// The frames a bootstrap sends after the rendezvous besides the collectives' contributions
// (Bootstrap::Op): results, errors, goodbyes, aborts and failure notices, with their payloads.
// Private to the bootstrap's sources (bootstrap.cpp, bootstrap_collectives.cpp,
// bootstrap_monitor.cpp).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "occl/occl.h"

namespace occl::bootstrap::notices {

// Frame types after the rendezvous, besides the contributions (Op).
enum FrameType : uint32_t { kResult = 3, kError = 4, kGoodbye = 5, kPeerFailed = 6, kAbort = 7 };

// Goodbyes and failure notices are best effort: a peer that cannot take them is gone anyway.
constexpr int64_t kNoticeWaitMs = 1000;

inline occlResult_t resultFromWire(int32_t code) {
  return code > 0 && code < occlNumResults ? static_cast<occlResult_t>(code) : occlRemoteError;
}

// {int32 value, text}: the payload of kError (value = code) and kPeerFailed (value = rank).
inline std::vector<char> encodeNote(int32_t value, const std::string& text) {
  std::vector<char> out(sizeof(value) + text.size());
  std::memcpy(out.data(), &value, sizeof(value));
  std::memcpy(out.data() + sizeof(value), text.data(), text.size());
  return out;
}

inline std::pair<int32_t, std::string> decodeNote(const std::vector<char>& payload) {
  int32_t value = -1;
  if (payload.size() < sizeof(value)) return {value, "(malformed notice)"};
  std::memcpy(&value, payload.data(), sizeof(value));
  return {value, std::string(payload.begin() + sizeof(value), payload.end())};
}

}  // namespace occl::bootstrap::notices
