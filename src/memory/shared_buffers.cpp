#include "memory/shared_buffers.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <tuple>

#include "absl/strings/str_format.h"
#include "util/one_writer.hpp"

namespace occl::memory {
namespace {

struct Region {
  size_t bytes;
  int fd;
  uint64_t inode;
  uint32_t pins;  // resolve()s of ranks in this process not yet unpinned
};

struct PeerKey {
  int32_t pid;
  int32_t fd;
  uint64_t inode;
  bool operator<(const PeerKey& o) const { return std::tie(pid, fd, inode) < std::tie(o.pid, o.fd, o.inode); }
};

struct PeerMapping {
  char* base;
  size_t bytes;
  uint32_t pins;
  bool stale;  // the owner no longer holds it: unmapped at the last unpin
};

// Every allocation of this process by base address (`retired`: released while pinned), and every
// peer region it has mapped. One lock: lookups are a few per submission, mappings are rare.
struct Registry {
  std::mutex mu;
  std::map<uintptr_t, Region> own;
  std::map<uintptr_t, Region> retired;
  std::map<PeerKey, PeerMapping> peers;
  std::atomic<uint64_t> releases{0};  // written under mu, read without it (releases())
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: daemons may look up while the process exits
  return *r;
}

// This process's pid without a system call per lookup (getpid is one, and describe runs for both
// buffers of every submission): read once, and again in a child after fork.
int32_t thisPid() {
  static std::atomic<int32_t> cached{0};
  static std::once_flag atFork;
  std::call_once(atFork, [] { pthread_atfork(nullptr, nullptr, [] { cached.store(0, std::memory_order_relaxed); }); });
  int32_t pid = cached.load(std::memory_order_relaxed);
  if (pid == 0) {
    pid = static_cast<int32_t>(getpid());
    cached.store(pid, std::memory_order_relaxed);
  }
  return pid;
}

std::string procFdPath(int32_t pid, int32_t fd) { return absl::StrFormat("/proc/%d/fd/%d", pid, fd); }

Status sysError(const std::string& what) {
  return Status::error(occlSystemError, absl::StrFormat("%s: %s", what, std::strerror(errno)));
}

// The region of `regions` that holds [p, p + bytes), or regions.end(). Lock held.
std::map<uintptr_t, Region>::iterator findIn(std::map<uintptr_t, Region>& regions, uintptr_t p, size_t bytes) {
  auto it = regions.upper_bound(p);
  if (it == regions.begin()) return regions.end();
  --it;
  const uintptr_t end = it->first + it->second.bytes;
  return p < end && bytes <= end - p ? it : regions.end();
}

void unmapOwn(uintptr_t base, const Region& region) {
  munmap(reinterpret_cast<void*>(base), region.bytes);
  close(region.fd);
}

// Unmaps the regions of `pid` whose fd no longer holds the file mapped here (the owner freed it,
// or died), or marks them for their last unpin. Lock held.
void dropStale(Registry& r, int32_t pid) {
  for (auto it = r.peers.lower_bound(PeerKey{pid, INT32_MIN, 0}); it != r.peers.end() && it->first.pid == pid;) {
    struct stat st {};
    if (stat(procFdPath(pid, it->first.fd).c_str(), &st) == 0 && static_cast<uint64_t>(st.st_ino) == it->first.inode) {
      ++it;
      continue;
    }
    if (it->second.pins > 0) {
      it->second.stale = true;
      ++it;
      continue;
    }
    munmap(it->second.base, it->second.bytes);
    it = r.peers.erase(it);
  }
}

}  // namespace

Result<void*> allocate(size_t bytes) {
  if (bytes == 0) return Status::error(occlInvalidArgument, "size is 0: occlMemAlloc needs at least one byte");
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  if (bytes > SIZE_MAX - page)
    return Status::error(occlInvalidArgument, absl::StrFormat("size = %d bytes is too large", bytes));
  const size_t rounded = (bytes + page - 1) / page * page;
  const int fd = memfd_create("occl-mem", MFD_CLOEXEC);
  if (fd < 0) return sysError("memfd_create for occlMemAlloc");
  struct stat st {};
  if (ftruncate(fd, static_cast<off_t>(rounded)) != 0 || fstat(fd, &st) != 0) {
    Status s = sysError(absl::StrFormat("sizing %d bytes of shared memory for occlMemAlloc", rounded));
    close(fd);
    return s;
  }
  void* p = mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    Status s = sysError(absl::StrFormat("mapping %d bytes of shared memory for occlMemAlloc", rounded));
    close(fd);
    return s;
  }
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.own[reinterpret_cast<uintptr_t>(p)] = Region{rounded, fd, static_cast<uint64_t>(st.st_ino), 0};
  return p;
}

Status release(void* ptr) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.own.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == r.own.end())
    return Status::error(occlInvalidArgument,
                         absl::StrFormat("ptr = %p is not a pointer occlMemAlloc returned (or it was freed)", ptr));
  // Counted first: a submission that compares the count after this release cannot pass its
  // buffer on an earlier describe().
  addByOneWriter(r.releases, uint64_t{1}, std::memory_order_seq_cst);
  if (it->second.pins > 0)
    r.retired.insert(*it);  // a rank of this process still folds in it: unmapped at its last unpin
  else
    unmapOwn(it->first, it->second);
  r.own.erase(it);
  return Status::success();
}

uint64_t releases() { return registry().releases.load(std::memory_order_seq_cst); }

SharedRef describe(const void* ptr, size_t bytes) {
  Registry& r = registry();
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = findIn(r.own, p, bytes);
  if (it == r.own.end()) return SharedRef{0, 0, 0, -1};
  return SharedRef{it->second.inode, p - it->first, thisPid(), it->second.fd};
}

Result<char*> resolve(const SharedRef& ref, size_t bytes) {
  Registry& r = registry();
  auto within = [&](size_t regionBytes) { return ref.offset <= regionBytes && bytes <= regionBytes - ref.offset; };
  auto outside = [&](size_t regionBytes) {
    return Status::error(occlInvalidArgument,
                         absl::StrFormat("a buffer of %d bytes at offset %d of a shared region of %d bytes (pid %d) "
                                         "runs past its end", bytes, ref.offset, regionBytes, ref.pid));
  };
  std::lock_guard<std::mutex> lock(r.mu);
  if (ref.pid == thisPid()) {  // one of ours (a rank in this process that reached us through shm)
    for (auto& [base, region] : r.own)
      if (region.inode == ref.inode && region.fd == ref.fd) {
        if (!within(region.bytes)) return outside(region.bytes);
        region.pins += 1;
        return reinterpret_cast<char*>(base + ref.offset);
      }
  }
  const PeerKey key{ref.pid, ref.fd, ref.inode};
  if (auto it = r.peers.find(key); it != r.peers.end() && !it->second.stale) {
    if (!within(it->second.bytes)) return outside(it->second.bytes);
    it->second.pins += 1;
    return it->second.base + ref.offset;
  }
  dropStale(r, ref.pid);
  const std::string path = procFdPath(ref.pid, ref.fd);
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return sysError(absl::StrFormat("opening a peer's occlMemAlloc buffer (%s)", path));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    Status s = sysError(absl::StrFormat("fstat of %s", path));
    close(fd);
    return s;
  }
  if (static_cast<uint64_t>(st.st_ino) != ref.inode) {
    close(fd);
    return Status::error(occlSystemError,
                         absl::StrFormat("%s is not the peer's occlMemAlloc buffer (inode %d, expected %d): are the "
                                         "ranks in different pid namespaces?", path, st.st_ino, ref.inode));
  }
  const auto regionBytes = static_cast<size_t>(st.st_size);
  if (!within(regionBytes)) {
    close(fd);
    return outside(regionBytes);
  }
  void* p = mmap(nullptr, regionBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);  // the mapping keeps the file
  if (p == MAP_FAILED) return sysError(absl::StrFormat("mapping %d bytes of %s", regionBytes, path));
  r.peers[key] = PeerMapping{static_cast<char*>(p), regionBytes, 1, false};
  return static_cast<char*>(p) + ref.offset;
}

void unpin(const char* p) {
  Registry& r = registry();
  const auto at = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(r.mu);
  if (auto it = findIn(r.own, at, 0); it != r.own.end()) {
    if (it->second.pins > 0) it->second.pins -= 1;
    return;
  }
  if (auto it = findIn(r.retired, at, 0); it != r.retired.end()) {
    if (it->second.pins > 0 && --it->second.pins == 0) {
      unmapOwn(it->first, it->second);
      r.retired.erase(it);
    }
    return;
  }
  for (auto it = r.peers.begin(); it != r.peers.end(); ++it) {
    PeerMapping& m = it->second;
    if (p < m.base || p >= m.base + m.bytes) continue;
    if (m.pins > 0 && --m.pins == 0 && m.stale) {
      munmap(m.base, m.bytes);
      r.peers.erase(it);
    }
    return;
  }
}

size_t peerMappings() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.peers.size();
}

size_t pins() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  size_t n = 0;
  for (const auto& [base, region] : r.own) n += region.pins;
  for (const auto& [base, region] : r.retired) n += region.pins;
  for (const auto& [key, mapping] : r.peers) n += mapping.pins;
  return n;
}

}  // namespace occl::memory
