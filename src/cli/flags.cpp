#include "cli/flags.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <string_view>

#include "occl/occl.h"

namespace occl::cli {
namespace {

const Flag* findLong(const std::vector<Flag>& flags, std::string_view name) {
  for (const Flag& f : flags)
    if (name == f.longName) return &f;
  return nullptr;
}

const Flag* findShort(const std::vector<Flag>& flags, char c) {
  for (const Flag& f : flags)
    if (f.shortName == c) return &f;
  return nullptr;
}

// `text`'s lines ('\n' breaks them too) wrapped at word boundaries to `width` columns.
std::vector<std::string> wrapped(std::string_view text, size_t width) {
  std::vector<std::string> lines;
  for (size_t start = 0; start <= text.size();) {
    size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(start, nl - start);
    while (line.size() > width) {
      size_t cut = line.rfind(' ', width);
      if (cut == std::string_view::npos || cut == 0) cut = line.find(' ');
      if (cut == std::string_view::npos) break;
      lines.emplace_back(line.substr(0, cut));
      line.remove_prefix(cut + 1);
    }
    lines.emplace_back(line);
    start = nl + 1;
  }
  return lines;
}

}  // namespace

Parsed parse(const std::vector<std::string>& args, const std::vector<Flag>& flags) {
  Parsed out;
  bool flagsEnded = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (flagsEnded || a == "-" || a.empty() || a[0] != '-') {
      out.positionals.push_back(a);
      continue;
    }
    if (a == "--") {
      flagsEnded = true;
      continue;
    }
    const Flag* flag = nullptr;
    std::optional<std::string> inlineValue;
    std::string_view name;
    if (a.rfind("--", 0) == 0) {
      const size_t eq = a.find('=');
      name = std::string_view(a).substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
      if (eq != std::string::npos) inlineValue = a.substr(eq + 1);
      flag = findLong(flags, name);
      if (flag == nullptr && (name == "help" || name == "version") && !inlineValue) {
        (name == "help" ? out.help : out.version) = true;
        continue;
      }
    } else {
      flag = findShort(flags, a[1]);
      if (flag == nullptr && a == "-h") {
        out.help = true;
        continue;
      }
      if (a.size() > 2) inlineValue = a.substr(2);
    }
    if (flag == nullptr) {
      out.error = "unknown flag \"" + a + "\"";
      return out;
    }
    std::string value;
    if (!flag->valueName.empty()) {
      if (inlineValue) {
        value = *inlineValue;
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        out.error = label(*flag) + ": missing value (" + flag->valueName + ")";
        return out;
      }
    } else if (inlineValue) {
      out.error = label(*flag) + ": takes no value (got \"" + *inlineValue + "\")";
      return out;
    }
    if (std::string expected = flag->apply(value); !expected.empty()) {
      out.error = label(*flag) + (flag->valueName.empty() ? ": " : ": invalid value \"" + value + "\"; ") +
                  "expected " + expected;
      return out;
    }
  }
  return out;
}

std::string label(const Flag& flag) {
  std::string s = flag.shortName != '\0' ? std::string("-") + flag.shortName + "/" : "";
  return s + "--" + flag.longName;
}

std::string usage(const std::vector<Flag>& flags) {
  constexpr size_t kColumn = 25;  // where the help text starts
  constexpr size_t kWidth = 100;  // and where it wraps
  std::string out;
  for (const Flag& f : flags) {
    std::string left = "  ";
    left += f.shortName != '\0' ? std::string("-") + f.shortName + "," : "";
    left += "--" + f.longName;
    if (!f.valueName.empty()) left += " " + f.valueName;
    left += left.size() + 1 < kColumn ? std::string(kColumn - left.size(), ' ') : "\n" + std::string(kColumn, ' ');
    bool first = true;
    for (const std::string& line : wrapped(f.help, kWidth - kColumn)) {
      out += (first ? left : std::string(kColumn, ' ')) + line + "\n";
      first = false;
    }
  }
  out += "  -h,--help              this text\n";
  out += "  --version              occl's version\n";
  return out;
}

std::string versionLine(std::string_view program) {
  return std::string(program) + " (occl) " + std::to_string(OCCL_MAJOR) + "." + std::to_string(OCCL_MINOR) + "." +
         std::to_string(OCCL_PATCH);
}

std::optional<int64_t> parseInt(std::string_view text) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

std::optional<uint64_t> parseBytes(std::string_view text) {
  uint64_t multiplier = 1;
  if (!text.empty()) {
    switch (std::tolower(static_cast<unsigned char>(text.back()))) {
      case 'k': multiplier = uint64_t{1} << 10; break;
      case 'm': multiplier = uint64_t{1} << 20; break;
      case 'g': multiplier = uint64_t{1} << 30; break;
      default: break;
    }
    if (multiplier != 1) text.remove_suffix(1);
  }
  uint64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  if (value > UINT64_MAX / multiplier) return std::nullopt;
  return value * multiplier;
}

std::string intInRange(std::string_view value, int64_t lo, int64_t hi, int& out) {
  auto n = parseInt(value);
  if (!n || *n < lo || *n > hi) return "an integer in " + std::to_string(lo) + ".." + std::to_string(hi);
  out = static_cast<int>(*n);
  return "";
}

std::function<std::string(std::string_view)> bytesAtLeast(uint64_t& field, uint64_t least) {
  return [&field, least](std::string_view v) -> std::string {
    auto n = parseBytes(v);
    if (!n || *n < least) return "a byte count >= " + std::to_string(least) + " (K/M/G suffix ok)";
    field = *n;
    return "";
  };
}

Flag onlyValue(char shortName, std::string longName, std::string only, std::string why) {
  std::string help = "nccl-tests' flag, only " + only + " here: " + why;
  return Flag{shortName, std::move(longName), only, std::move(help),
              [only, why](std::string_view v) -> std::string {
                if (v == only) return "";
                return only + ": " + why;
              }};
}

}  // namespace occl::cli
