// The tools' one flag parser (src/cli/flags.hpp): getopt_long's spellings, positionals, "--",
// errors that name the flag and what it expects, help and version for every tool, and the usage
// lines it lays out.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/flags.hpp"
#include "occl/occl.h"

namespace occl::cli {
namespace {

struct Seen {
  int bytes = 0;
  bool quiet = false;
  std::string name;
};

std::vector<Flag> table(Seen& s) {
  return {
      {'b', "minbytes", "N", "smallest size", [&s](std::string_view v) { return intInRange(v, 0, 1000, s.bytes); }},
      {'q', "quiet", "", "say less",
       [&s](std::string_view) {
         s.quiet = true;
         return std::string();
       }},
      {'\0', "name", "NAME", "a name\non two lines",
       [&s](std::string_view v) -> std::string {
         if (v.empty()) return "a non-empty name";
         s.name = std::string(v);
         return "";
       }},
  };
}

Parsed run(std::vector<std::string> args, Seen& s) { return parse(args, table(s)); }

TEST(CliFlags, TakesEveryGetoptSpellingAndTheLastWins) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"-b", "8"}, {"-b8"}, {"--minbytes", "8"}, {"--minbytes=8"}, {"-b", "5", "--minbytes=8"}}) {
    Seen s;
    const Parsed p = run(args, s);
    EXPECT_TRUE(p.ok()) << p.error;
    EXPECT_EQ(s.bytes, 8) << args[0];
  }
}

TEST(CliFlags, PositionalsKeepTheirOrderAndDashDashEndsTheFlags) {
  Seen s;
  const Parsed p = run({"check", "-q", "a.xml", "-", "--", "-b", "--name"}, s);
  ASSERT_TRUE(p.ok()) << p.error;
  EXPECT_TRUE(s.quiet);
  EXPECT_EQ(s.bytes, 0);
  EXPECT_EQ(p.positionals, (std::vector<std::string>{"check", "a.xml", "-", "-b", "--name"}));
}

TEST(CliFlags, ErrorsNameTheFlagAndWhatItExpects) {
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"-b", "x"}, "-b/--minbytes: invalid value \"x\"; expected an integer in 0..1000"},
      {{"--minbytes=2000"}, "-b/--minbytes: invalid value \"2000\"; expected an integer in 0..1000"},
      {{"-b"}, "-b/--minbytes: missing value (N)"},
      {{"--quiet=yes"}, "-q/--quiet: takes no value (got \"yes\")"},
      {{"-qq"}, "-q/--quiet: takes no value (got \"q\")"},
      {{"--name="}, "--name: invalid value \"\"; expected a non-empty name"},
      {{"--names", "x"}, "unknown flag \"--names\""},
      {{"-x"}, "unknown flag \"-x\""},
      {{"--help=1"}, "unknown flag \"--help=1\""},
  };
  for (const auto& [args, message] : cases) {
    Seen s;
    EXPECT_EQ(run(args, s).error, message) << args[0];
  }
}

TEST(CliFlags, HelpAndVersionAreEveryTools) {
  Seen s;
  EXPECT_TRUE(run({"-h"}, s).help);
  EXPECT_TRUE(run({"--help"}, s).help);
  const Parsed v = run({"--version"}, s);
  EXPECT_TRUE(v.version && v.ok() && !v.help);
  EXPECT_EQ(versionLine("occl-x"), "occl-x (occl) " + std::to_string(OCCL_MAJOR) + "." + std::to_string(OCCL_MINOR) + "." +
                                       std::to_string(OCCL_PATCH));
}

TEST(CliFlags, UsageAlignsWrapsAndEndsWithHelpAndVersion) {
  Seen s;
  std::vector<Flag> flags = table(s);
  flags.push_back(onlyValue('z', "blocking", "1", std::string(120, 'w') + " and more words after it"));
  const std::string text = usage(flags);
  EXPECT_NE(text.find("  -b,--minbytes N        smallest size\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  -q,--quiet             say less\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  --name NAME            a name\n                         on two lines\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("                         and more words after it\n"), std::string::npos) << text;
  EXPECT_TRUE(text.ends_with("  -h,--help              this text\n  --version              occl's version\n")) << text;
}

TEST(CliFlags, OnlyValueRefusesOthersSayingWhy) {
  std::vector<Flag> flags = {onlyValue('G', "cudagraph", "0", "no CUDA graphs here")};
  EXPECT_TRUE(parse({"-G", "0"}, flags).ok());
  EXPECT_EQ(parse({"-G", "5"}, flags).error, "-G/--cudagraph: invalid value \"5\"; expected 0: no CUDA graphs here");
}

TEST(CliFlags, NumbersAndBytes) {
  EXPECT_EQ(parseInt("-12"), -12);
  EXPECT_FALSE(parseInt("12x").has_value());
  EXPECT_FALSE(parseInt("").has_value());
  EXPECT_EQ(parseBytes("64K"), 64u << 10);
  EXPECT_EQ(parseBytes("3g"), uint64_t{3} << 30);
  EXPECT_FALSE(parseBytes("17179869184G").has_value());
  EXPECT_FALSE(parseBytes("-1").has_value());
}

}  // namespace
}  // namespace occl::cli
