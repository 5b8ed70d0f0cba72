// What occl prints itself: warnings (what it accepted or refused without failing the caller: an
// attribute it ignores, a stranger on the bootstrap port, an unknown OCCL_* variable) by default,
// and with OCCL_DEBUG=INFO or TRACE what it is doing, as NCCL_DEBUG does. OCCL_DEBUG_SUBSYS
// chooses subsystems (a comma list of the names below or ALL; a leading ^ excludes them),
// OCCL_DEBUG_FILE sends the lines to a file instead of stderr (%h: the host name, %p: the pid).
// These three variables are read here, once, at the first line (docs/configuration.md lists
// them). One write per line, so that lines of threads and processes sharing a terminal or a file
// do not interleave within a line.
#pragma once

#include <cstdint>
#include <string_view>

namespace occl {

enum class LogLevel : uint8_t { None, Warn, Info, Trace };

// Subsystems, as OCCL_DEBUG_SUBSYS names them (lower case there, any case accepted).
enum class LogSubsys : uint32_t {
  Init = 1u << 0,       // communicator creation, split, shrink, finalize
  Bootstrap = 1u << 1,  // rendezvous, failure detection, the status board
  Net = 1u << 2,        // the NET connector (UCX, its proxy)
  Coll = 1u << 3,       // registration and failures of collectives
  Transport = 1u << 4,  // connector memory, per-peer selection
  Env = 1u << 5,        // the environment and configuration
  Alloc = 1u << 6,      // occlMemAlloc and shared buffers
};

// Whether a line of `level` for `subsys` would be printed: callers test it before they build a
// costly message. A relaxed load once the settings are read.
bool logEnabled(LogLevel level, LogSubsys subsys);
// Prints `message` as one line if enabled ("occl: warning: ...", "occl: info [init]: ...").
void logLine(LogLevel level, LogSubsys subsys, std::string_view message);

inline void logWarning(std::string_view message) { logLine(LogLevel::Warn, LogSubsys::Env, message); }
inline void logInfo(LogSubsys subsys, std::string_view message) { logLine(LogLevel::Info, subsys, message); }
inline void logTrace(LogSubsys subsys, std::string_view message) { logLine(LogLevel::Trace, subsys, message); }

}  // namespace occl
