#include "transport/shm/pool_access.hpp"

#include <sys/mman.h>

#include <filesystem>
#include <system_error>

#include "absl/strings/str_format.h"

namespace occl::transport {

Result<std::shared_ptr<ShmPool>> PoolAccess::pool() {
  std::lock_guard<std::mutex> lock(mu_);
  if (pool_ == nullptr) {
    Result<std::shared_ptr<ShmPool>> opened = ShmPool::open(nonce_, timeoutMs_);
    if (!opened.ok()) return opened.status();
    pool_ = opened.value();
  }
  return pool_;
}

uint64_t PoolAccess::nextGeneration(const ConnectorKey& key, ConnectorEnd end) {
  std::lock_guard<std::mutex> lock(mu_);
  return generations_[std::pair{key, end}]++;
}

// Every segment of a job is named /occl-<nonce>-...: glibc's shm_open keeps it as /dev/shm/occl-...
JobSegments::JobSegments(uint64_t nonce) : prefix_(absl::StrFormat("occl-%016x-", nonce)) {}

JobSegments::~JobSegments() {
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/dev/shm", ec); !ec && it != std::filesystem::end(it);
       it.increment(ec)) {
    const std::string file = it->path().filename().string();
    if (file.rfind(prefix_, 0) == 0) shm_unlink(("/" + file).c_str());
  }
}

}  // namespace occl::transport
