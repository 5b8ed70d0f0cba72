// streamCopy (primitives/stream_copy.hpp) against memcpy: every length up to a few lines from
// every alignment of source and destination, so the head before the destination's 16-byte
// boundary, the streamed lines and the tail are each exercised alone and together, and nothing
// outside the destination range is written.
#include "primitives/stream_copy.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace occl {
namespace {

TEST(StreamCopy, MatchesMemcpyForEveryLengthAndAlignment) {
  if (!OCCL_STREAM_STORES) GTEST_SKIP() << "no streaming stores on this CPU: streamCopy is memcpy";
  constexpr size_t kMaxBytes = 5 * 64 + 17;
  constexpr size_t kGuard = 64;
  std::vector<unsigned char> src(kMaxBytes + 64), dst(kMaxBytes + 2 * kGuard + 64), want(dst.size());
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 37 + 11);
  for (size_t srcShift = 0; srcShift < 16; ++srcShift) {
    for (size_t dstShift = 0; dstShift < 16; ++dstShift) {
      for (size_t bytes = 0; bytes <= kMaxBytes; ++bytes) {
        std::memset(dst.data(), 0xA5, dst.size());
        std::memset(want.data(), 0xA5, want.size());
        std::memcpy(want.data() + kGuard + dstShift, src.data() + srcShift, bytes);
        streamCopy(dst.data() + kGuard + dstShift, src.data() + srcShift, bytes);
        ASSERT_EQ(std::memcmp(dst.data(), want.data(), dst.size()), 0)
            << bytes << " bytes, source +" << srcShift << ", destination +" << dstShift;
      }
    }
  }
}

TEST(StreamCopy, CopiesAMultiMegabyteBufferBitForBit) {
  if (!OCCL_STREAM_STORES) GTEST_SKIP() << "no streaming stores on this CPU: streamCopy is memcpy";
  constexpr size_t kBytes = (size_t{4} << 20) + 3;
  std::vector<uint32_t> src(kBytes / 4 + 1), dst(src.size(), 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint32_t>(i * 2654435761u);
  streamCopy(reinterpret_cast<char*>(dst.data()) + 1, reinterpret_cast<const char*>(src.data()), kBytes);
  EXPECT_EQ(std::memcmp(reinterpret_cast<char*>(dst.data()) + 1, src.data(), kBytes), 0);
}

}  // namespace
}  // namespace occl
