// FNV-1a hashing for what must hash alike in every process (absl::Hash is seeded per process):
// program fingerprints, the launcher's job identity, GPU identities.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

namespace occl {

class Fnv1a {
 public:
  template <typename T>
    requires std::is_arithmetic_v<T> || std::is_enum_v<T>
  Fnv1a& add(T value) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(&value);
    for (size_t i = 0; i < sizeof(T); ++i) mix(bytes[i]);
    return *this;
  }
  Fnv1a& add(std::string_view text) {
    for (unsigned char c : text) mix(c);
    return add(static_cast<uint64_t>(text.size()));
  }
  uint64_t value() const { return h_; }

 private:
  void mix(unsigned char c) {
    h_ ^= c;
    h_ *= 1099511628211ull;
  }
  uint64_t h_ = 14695981039346656037ull;
};

}  // namespace occl
