// Shared-memory connectors between processes of one host, under the pairing rule of
// connector.hpp: the k-th attach of a key by one end maps generation k of a POSIX shm segment
// named after the job nonce, the key and k. Whichever end comes first creates and sizes it
// (O_EXCL), the other waits until it has its size; once both have mapped it, the name is
// unlinked. A segment whose peer never joined keeps its name (what was sent waits there for the
// peer), so when the last connector and the factory of a communicator are gone, every name of
// the job's nonce left in /dev/shm is unlinked: after occlCommFinalize's barrier no peer can
// still join, and without it the job is being torn down. That includes segments a killed peer
// created for collectives this rank never registered: the job's survivors leave nothing behind.
// (A job none of whose ranks lives to destroy its communicator leaves its segments, as NCCL's.)
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_format.h"
#include "transport/connector.hpp"

namespace occl::transport {
namespace {

// Every segment of a job is named /occl-<nonce>-...: glibc's shm_open keeps it as /dev/shm/occl-...
std::string jobPrefix(uint64_t nonce) { return absl::StrFormat("occl-%016x-", nonce); }

// Unlinks, when the last of a communicator's shm connectors and its factory are gone, every name
// of the job's nonce left in /dev/shm: those whose peer never joined, this rank's or a dead peer's.
class JobSegments {
 public:
  explicit JobSegments(uint64_t nonce) : prefix_(jobPrefix(nonce)) {}
  ~JobSegments() {
    std::error_code ec;
    for (auto it = std::filesystem::directory_iterator("/dev/shm", ec); !ec && it != std::filesystem::end(it);
         it.increment(ec)) {
      const std::string file = it->path().filename().string();
      if (file.rfind(prefix_, 0) == 0) shm_unlink(("/" + file).c_str());
    }
  }

 private:
  std::string prefix_;
};

size_t pageBytes() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

// The error of a segment whose `bytes` of pages /dev/shm could not give.
Status noRoom(const std::string& name, uint64_t bytes, const std::string& why) {
  struct statvfs fs {};
  const std::string room = statvfs("/dev/shm", &fs) == 0
                               ? absl::StrFormat("%d of its %d bytes free", static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize,
                                                 static_cast<uint64_t>(fs.f_blocks) * fs.f_frsize)
                               : std::string("its size unknown");
  return Status::error(occlSystemError,
                       absl::StrFormat("shared memory %s: /dev/shm could not give the %d bytes of pages it needs (%s; %s): "
                                       "give /dev/shm more (docker run --shm-size, a larger tmpfs) or register fewer "
                                       "collectives",
                                       name, bytes, why, room));
}

// Has the tmpfs pages of [from, from + bytes) allocated now (MADV_POPULATE_WRITE, Linux 5.14), so
// that a /dev/shm with no room for them fails here, naming the cause, where the first touch would
// raise SIGBUS and kill the process (Docker's /dev/shm is 64 MiB unless --shm-size says more). The
// pages change nothing: whatever a peer already wrote there stays. A kernel without the advice
// (EINVAL) leaves it to the touches, as before.
Status reservePages(void* from, size_t bytes, const std::string& name) {
  const uintptr_t page = pageBytes();
  const uintptr_t start = reinterpret_cast<uintptr_t>(from) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(from) + bytes + page - 1) / page * page;
  if (bytes == 0 || madvise(reinterpret_cast<void*>(start), end - start, MADV_POPULATE_WRITE) == 0 || errno == EINVAL)
    return Status::success();
  // EFAULT: a touch would have raised SIGBUS, i.e. the tmpfs is full (or its memory limit reached).
  return noRoom(name, end - start, errno == EFAULT ? "it is full" : std::strerror(errno));
}

class ShmMemory : public ConnectorMemory {
 public:
  ShmMemory(void* base, size_t bytes, std::string name, std::shared_ptr<JobSegments> segments)
      : bytes_(bytes), name_(std::move(name)), segments_(std::move(segments)) {
    base_ = base;
  }
  // A segment the peer has not mapped yet keeps its name, for the peer to find what was sent;
  // JobSegments unlinks it at the end.
  ~ShmMemory() override { munmap(base_, bytes_); }
  // Each process has its own page tables: both ends map in what they use, once the pages exist.
  Status populate(ConnectorEnd end, uint32_t nSlots, uint64_t slotBytes, uint64_t bytesPerSlot) override {
    Status room = Status::success();
    forEachUsedRange(base_, nSlots, slotBytes, bytesPerSlot, [&](char* from, size_t bytes) {
      if (room.ok()) room = reservePages(from, bytes, name_);
    });
    if (!room.ok()) return room;
    populateHostSlots(base_, nSlots, slotBytes, bytesPerSlot, end == ConnectorEnd::Sender);
    return Status::success();
  }
  // Punches out every page after the first (which holds the header) from the segment: the peer
  // that attaches later finds the poison and fails; tmpfs pages were all that was left of it.
  void discard() override {
    if (bytes_ > pageBytes()) (void)madvise(static_cast<char*>(base_) + pageBytes(), bytes_ - pageBytes(), MADV_REMOVE);
  }
  void unlinkIfShared() {
    if (atomics::loadAcquire(&header()->attached) >= 2) shm_unlink(name_.c_str());
  }

 private:
  size_t bytes_;
  std::string name_;
  std::shared_ptr<JobSegments> segments_;
};

Status sysError(const std::string& what, const std::string& name) {
  return Status::error(occlSystemError, absl::StrFormat("%s of shared memory %s failed: %s", what, name,
                                                        std::strerror(errno)));
}

// Opens or creates the segment and returns its fd once it has `bytes` bytes.
Result<int> openSized(const std::string& name, size_t bytes, int64_t timeoutMs) {
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0) {
    // The header's page first, size unchanged (a joining peer waits for the final size): with no
    // room for it the segment goes, and a peer that opened it meanwhile times out waiting for its
    // size, where a poison could not have been written anywhere.
    if (fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, static_cast<off_t>(pageBytes())) != 0 && errno == ENOSPC) {
      Status s = noRoom(name, pageBytes(), "it is full");
      close(fd);
      shm_unlink(name.c_str());
      return s;
    }
    if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
      Status s = sysError("ftruncate", name);
      close(fd);
      shm_unlink(name.c_str());
      return s;
    }
    return fd;
  }
  if (errno != EEXIST) return sysError("shm_open", name);
  fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return sysError("shm_open", name);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
  for (;;) {
    struct stat st {};
    if (fstat(fd, &st) != 0) {
      Status s = sysError("fstat", name);
      close(fd);
      return s;
    }
    if (static_cast<size_t>(st.st_size) == bytes) return fd;
    if (st.st_size != 0) {
      close(fd);
      return Status::error(occlInvalidUsage,
                           absl::StrFormat("shared memory %s has %d bytes, this rank expects %d: connectorSlots "
                                           "and connectorSlotBytes must be identical on all ranks",
                                           name, st.st_size, bytes));
    }
    if (std::chrono::steady_clock::now() > deadline) {
      close(fd);
      return Status::error(occlTimeout, absl::StrFormat("shared memory %s was never sized by its creator", name));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

class ShmFactory : public ConnectorFactory {
 public:
  ShmFactory(uint64_t nonce, int64_t timeoutMs) : nonce_(nonce), timeoutMs_(timeoutMs) {}

  Result<std::shared_ptr<ConnectorMemory>> attach(const ConnectorKey& key, ConnectorEnd end, uint32_t nSlots,
                                                  uint64_t slotBytes) override {
    const std::string name = absl::StrFormat("/%s%016x-%d-%d-%d-%d-%d", jobPrefix(nonce_), key.collId, key.sender,
                                             key.receiver, key.channel, key.form, nextGeneration(key, end));
    const size_t bytes = fifoBytes(nSlots, slotBytes);
    Result<int> fd = openSized(name, bytes, timeoutMs_);
    if (!fd.ok()) return fd.status();
    void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.value(), 0);
    const int mmapErrno = errno;
    close(fd.value());
    if (base == MAP_FAILED) {
      errno = mmapErrno;
      return sysError("mmap", name);
    }
    auto memory = std::make_shared<ShmMemory>(base, bytes, name, segments_);
    if (Status room = reservePages(base, sizeof(FifoHeader), name); !room.ok()) return room;
    Status geometry = claimGeometry(memory->header(), nSlots, slotBytes, key);
    if (!geometry.ok()) return geometry;
    memory->unlinkIfShared();
    return std::shared_ptr<ConnectorMemory>(memory);
  }
  const char* name() const override { return "shm"; }

 private:
  // How often this end attached `key` before: a rank is always the same end of a key, so both
  // ends count their registrations alike and the k-th ones meet in one segment.
  uint64_t nextGeneration(const ConnectorKey& key, ConnectorEnd end) {
    std::lock_guard<std::mutex> lock(mu_);
    return generations_[std::pair{key, end}]++;
  }

  uint64_t nonce_;
  int64_t timeoutMs_;
  std::shared_ptr<JobSegments> segments_ = std::make_shared<JobSegments>(nonce_);
  std::mutex mu_;
  absl::flat_hash_map<std::pair<ConnectorKey, ConnectorEnd>, uint64_t> generations_;
};

}  // namespace

std::unique_ptr<ConnectorFactory> makeShmFactory(uint64_t jobNonce, int64_t attachTimeoutMs) {
  return std::make_unique<ShmFactory>(jobNonce, attachTimeoutMs);
}

}  // namespace occl::transport
