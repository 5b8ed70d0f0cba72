// The command line of every occl tool (occl-bench and its baselines, occl-ir, occl-torture), parsed
// one way. A tool lists its flags in a table; each flag's handler checks its value and applies it.
// Spellings are getopt_long's: "-b 8", "-b8", "--minbytes 8", "--minbytes=8"; a switch takes no
// value; "--" ends the flags; "-" alone and anything not starting with '-' are positionals, in
// order. -h/--help and --version are every tool's. Later flags override earlier ones.
//
// Parsing never prints, exits or throws: an error comes back as one line naming the argument and
// what it expects ("-b/--minbytes: invalid value \"x\"; expected ..."), which the tool prints with
// a pointer to --help and exits 2.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace occl::cli {

struct Flag {
  char shortName = '\0';  // '\0': a long spelling only
  std::string longName;
  std::string valueName;  // how usage shows the value ("N", "FILE", "0|1"); empty: a switch
  std::string help;       // usage text; '\n' starts a continuation line
  // Checks `value` (empty for a switch) and applies it; returns "" or what was expected.
  std::function<std::string(std::string_view value)> apply;
};

struct Parsed {
  std::vector<std::string> positionals;
  bool help = false;
  bool version = false;
  std::string error;  // empty on success
  bool ok() const { return error.empty(); }
};

// `args` without the program name.
Parsed parse(const std::vector<std::string>& args, const std::vector<Flag>& flags);

// "-b/--minbytes" or "--algo": how errors name a flag.
std::string label(const Flag& flag);
// The flags' usage lines, aligned: "  -b,--minbytes N        smallest size ...".
std::string usage(const std::vector<Flag>& flags);
// "<program> <occl version>", for --version.
std::string versionLine(std::string_view program);

// Values every tool reads.
std::optional<int64_t> parseInt(std::string_view text);
// "64", "64K", "1M", "2g": a byte count with an optional binary K/M/G suffix (either case).
std::optional<uint64_t> parseBytes(std::string_view text);
// Applies an integer in lo..hi to `out`; returns "" or what was expected.
std::string intInRange(std::string_view value, int64_t lo, int64_t hi, int& out);
// A handler that stores a byte count of at least `least` (K/M/G suffixes) in `field`.
std::function<std::string(std::string_view)> bytesAtLeast(uint64_t& field, uint64_t least);
// A flag whose only supported value is `only` (an nccl-tests flag occl has no other meaning for):
// any other value is refused with `why`.
Flag onlyValue(char shortName, std::string longName, std::string only, std::string why);

}  // namespace occl::cli
