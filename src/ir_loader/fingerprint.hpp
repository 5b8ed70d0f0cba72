// FNV-1a hashing for what must hash alike in every process (no per-process seed), and the
// fingerprint of a Program: ranks that register one collective compare fingerprints, so a file
// loaded under the same name but with other contents on another rank is caught.
#pragma once

#include <cstdint>
#include <string_view>
#include <type_traits>

#include "ir_loader/program.hpp"

namespace occl::ir {

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

// Everything that changes what a Program does on any rank: collective, geometry, placements and
// every block and step (source lines excluded).
uint64_t fingerprint(const Program& p);

}  // namespace occl::ir
