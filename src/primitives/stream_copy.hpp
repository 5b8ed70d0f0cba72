// streamCopy: a host copy whose stores bypass the cache (x86 non-temporal stores), for a
// destination that nobody reads soon: the CPU neither reads the destination's lines first (no
// read-for-ownership) nor keeps them, so a copy into cold memory moves two streams instead of
// three. A destination that is already in cache (the source's own lines, an in-place buffer just
// read) is better written by memcpy: a streaming store evicts the line it writes.
//
// The stores are weakly ordered: streamCopy ends with a store fence, so a release store after it
// (a FIFO publish, a notice) is seen after the copied bytes, as after memcpy. Host code with SSE2
// (every x86-64) only; elsewhere it is memcpy (OCCL_STREAM_STORES 0).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__) && !defined(__CUDA_ARCH__)
#include <emmintrin.h>
#define OCCL_STREAM_STORES 1
#else
#define OCCL_STREAM_STORES 0
#endif

namespace occl {

inline void streamCopy(void* dst, const void* src, size_t bytes) {
#if OCCL_STREAM_STORES
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  // Up to the first 16-byte boundary of the destination by memcpy, then aligned streaming
  // stores of 64 bytes (a line per round), then the tail by memcpy.
  const size_t head = (16 - reinterpret_cast<uintptr_t>(d) % 16) % 16;
  if (bytes < head + 64) {
    memcpy(d, s, bytes);
    return;
  }
  memcpy(d, s, head);
  d += head;
  s += head;
  bytes -= head;
  for (; bytes >= 64; bytes -= 64, d += 64, s += 64) {
    const __m128i v0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
    const __m128i v1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16));
    const __m128i v2 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 32));
    const __m128i v3 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d), v0);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 16), v1);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 32), v2);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 48), v3);
  }
  memcpy(d, s, bytes);
  _mm_sfence();
#else
  memcpy(dst, src, bytes);
#endif
}

}  // namespace occl
