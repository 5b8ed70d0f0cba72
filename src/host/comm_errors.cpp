#include "host/comm_errors.hpp"

namespace occl::host {

void CommErrors::setAsync(occlResult_t code, const std::string& why) {
  occlResult_t expected = occlSuccess;
  if (!async_.compare_exchange_strong(expected, code)) return;
  std::lock_guard<std::mutex> lock(mu_);
  lastError_ = why;
  asyncWhy_ = why;
}

std::string CommErrors::asyncWhy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return asyncWhy_;
}

Status CommErrors::asyncStatus(occlResult_t fallback) const {
  std::lock_guard<std::mutex> lock(mu_);
  occlResult_t code = async();
  return Status::error(code != occlSuccess ? code : fallback, asyncWhy_);
}

occlResult_t CommErrors::record(const Status& s) {
  if (!s.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    lastError_ = s.message;
  }
  return s.code;
}

std::string CommErrors::lastError() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lastError_;
}

}  // namespace occl::host
