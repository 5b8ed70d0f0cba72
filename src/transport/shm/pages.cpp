#include "transport/shm/pages.hpp"

#include <sys/mman.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"

namespace occl::transport {

size_t pageBytes() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

size_t wholePages(size_t bytes) { return (bytes + pageBytes() - 1) / pageBytes() * pageBytes(); }

namespace {
constexpr size_t kMinPackedBytes = 256;  // kFifoDataOffset's alignment
}  // namespace

size_t rangeBytes(size_t bytes, bool packed) {
  if (!packed || bytes > pageBytes() / 2) return wholePages(bytes);
  size_t range = kMinPackedBytes;
  while (range < bytes) range *= 2;
  return range;
}

Status noRoomInDevShm(uint64_t bytes, const std::string& why) {
  struct statvfs fs {};
  const std::string room = statvfs("/dev/shm", &fs) == 0
                               ? absl::StrFormat("%d of its %d bytes free", static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize,
                                                 static_cast<uint64_t>(fs.f_blocks) * fs.f_frsize)
                               : std::string("its size unknown");
  return Status::error(occlSystemError,
                       absl::StrFormat("/dev/shm could not give the %d bytes of pages it needs (%s; %s): "
                                       "give /dev/shm more (docker run --shm-size, a larger tmpfs) or register fewer "
                                       "collectives",
                                       bytes, why, room));
}

Status reservePages(void* from, size_t bytes) {
  const uintptr_t page = pageBytes();
  const uintptr_t start = reinterpret_cast<uintptr_t>(from) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(from) + bytes + page - 1) / page * page;
  if (bytes == 0 || madvise(reinterpret_cast<void*>(start), end - start, MADV_POPULATE_WRITE) == 0 || errno == EINVAL)
    return Status::success();
  // EFAULT: a touch would have raised SIGBUS, i.e. the tmpfs is full (or its memory limit reached).
  return noRoomInDevShm(end - start, errno == EFAULT ? "it is full" : std::strerror(errno));
}

}  // namespace occl::transport
