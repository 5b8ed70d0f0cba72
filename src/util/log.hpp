// Warnings occl prints itself: what it accepted or refused without failing the caller (an
// attribute it ignores, a stranger on the bootstrap port). One write per line, so that lines of
// threads and processes sharing a terminal do not interleave within a line.
#pragma once

#include <unistd.h>

#include <string>
#include <string_view>

namespace occl {

inline void logWarning(std::string_view message) {
  std::string line = "occl: warning: ";
  line.append(message);
  if (line.back() != '\n') line += '\n';
  for (size_t done = 0; done < line.size();) {
    const ssize_t n = ::write(STDERR_FILENO, line.data() + done, line.size() - done);
    if (n <= 0) return;  // stderr closed or full: a warning is not worth blocking or failing for
    done += static_cast<size_t>(n);
  }
}

}  // namespace occl
