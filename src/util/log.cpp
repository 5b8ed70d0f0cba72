#include "util/log.hpp"

#include <fcntl.h>
#include <strings.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace occl {
namespace {

constexpr std::array<std::pair<const char*, LogSubsys>, 7> kSubsystems{{
    {"init", LogSubsys::Init},
    {"bootstrap", LogSubsys::Bootstrap},
    {"net", LogSubsys::Net},
    {"coll", LogSubsys::Coll},
    {"transport", LogSubsys::Transport},
    {"env", LogSubsys::Env},
    {"alloc", LogSubsys::Alloc},
}};
constexpr uint32_t kAllSubsystems = (1u << kSubsystems.size()) - 1;

const char* subsysName(LogSubsys s) {
  for (const auto& [name, value] : kSubsystems)
    if (value == s) return name;
  return "?";
}

void writeLine(int fd, std::string line) {
  if (line.empty() || line.back() != '\n') line += '\n';
  for (size_t done = 0; done < line.size();) {
    const ssize_t n = ::write(fd, line.data() + done, line.size() - done);
    if (n <= 0) return;  // closed or full: a log line is not worth blocking or failing for
    done += static_cast<size_t>(n);
  }
}

std::string hostName() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) return "unknown-host";
  return host;
}

// OCCL_DEBUG_FILE's pattern: %h the host name, %p the pid, %% a percent sign.
std::string expandPath(std::string_view pattern) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%' || i + 1 == pattern.size()) {
      out += pattern[i];
      continue;
    }
    const char c = pattern[++i];
    if (c == 'h') {
      out += hostName();
    } else if (c == 'p') {
      out += std::to_string(getpid());
    } else {
      out += c == '%' ? "%" : std::string{'%', c};
    }
  }
  return out;
}

struct Settings {
  LogLevel level = LogLevel::Warn;
  uint32_t subsystems = kAllSubsystems;
  int fd = STDERR_FILENO;
  std::string origin;  // "host:pid", for info and trace lines
};

const char* envText(const char* name) {
  const char* text = std::getenv(name);
  return text == nullptr || *text == '\0' ? nullptr : text;
}

Settings readSettings() {
  Settings s;
  std::vector<std::string> problems;  // written where the lines go, once that is known
  s.origin = hostName() + ":" + std::to_string(getpid());
  if (const char* level = envText("OCCL_DEBUG")) {
    constexpr std::pair<const char*, LogLevel> kLevels[] = {
        {"NONE", LogLevel::None}, {"WARN", LogLevel::Warn}, {"INFO", LogLevel::Info}, {"TRACE", LogLevel::Trace}};
    bool known = false;
    for (const auto& [name, value] : kLevels) {
      if (strcasecmp(level, name) == 0) {
        s.level = value;
        known = true;
      }
    }
    if (!known)
      problems.push_back(std::string("OCCL_DEBUG=\"") + level + "\" is not one of NONE, WARN, INFO, TRACE; warnings only");
  }
  if (const char* list = envText("OCCL_DEBUG_SUBSYS")) {
    std::string_view rest(list);
    const bool exclude = rest.front() == '^';
    if (exclude) rest.remove_prefix(1);
    uint32_t named = 0;
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      const std::string item(rest.substr(0, comma));
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      if (item.empty()) continue;
      bool known = strcasecmp(item.c_str(), "all") == 0;
      if (known) named = kAllSubsystems;
      for (const auto& [name, value] : kSubsystems) {
        if (strcasecmp(item.c_str(), name) == 0) {
          named |= static_cast<uint32_t>(value);
          known = true;
        }
      }
      if (!known)
        problems.push_back("OCCL_DEBUG_SUBSYS names \"" + item +
                           "\", not one of ALL, init, bootstrap, net, coll, transport, env, alloc");
    }
    s.subsystems = exclude ? kAllSubsystems & ~named : named;
  }
  if (const char* pattern = envText("OCCL_DEBUG_FILE")) {
    const std::string path = expandPath(pattern);
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
      s.fd = fd;  // kept open for the life of the process, as NCCL's debug file
    } else {
      problems.push_back("OCCL_DEBUG_FILE: cannot open \"" + path + "\"; logging to stderr");
    }
  }
  if (s.level != LogLevel::None)
    for (const std::string& p : problems) writeLine(s.fd, "occl: warning: " + p);
  return s;
}

const Settings& settings() {
  static const Settings s = readSettings();
  return s;
}

}  // namespace

bool logEnabled(LogLevel level, LogSubsys subsys) {
  const Settings& s = settings();
  if (level == LogLevel::None || level > s.level) return false;
  // Warnings are printed whatever the subsystems: they say something went wrong.
  return level == LogLevel::Warn || (s.subsystems & static_cast<uint32_t>(subsys)) != 0;
}

void logLine(LogLevel level, LogSubsys subsys, std::string_view message) {
  if (!logEnabled(level, subsys)) return;
  const Settings& s = settings();
  std::string line;
  if (level == LogLevel::Warn) {
    line = "occl: warning: ";
  } else {
    line = std::string("occl: ") + (level == LogLevel::Info ? "info [" : "trace [") + subsysName(subsys) + "] " +
           s.origin + ": ";
  }
  line.append(message);
  writeLine(s.fd, std::move(line));
}

}  // namespace occl
