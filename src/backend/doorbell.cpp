#include "backend/doorbell.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <climits>

namespace occl::backend {

void Doorbell::wait(uint32_t seen, int64_t timeoutUs) {
  timespec ts{static_cast<time_t>(timeoutUs / 1000000), static_cast<long>((timeoutUs % 1000000) * 1000)};
  // Spurious returns (EINTR, EAGAIN) are fine: every caller re-checks for work.
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&bell_), FUTEX_WAIT_PRIVATE, seen, &ts, nullptr, 0);
}

void Doorbell::wakeAll() {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&bell_), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace occl::backend
