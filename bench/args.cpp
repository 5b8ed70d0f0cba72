// Argument parsing for occl-bench. A table of flags, each with a handler that validates its value
// and fills Options; getopt-like spellings: "-b 8", "-b8", "--minbytes 8", "--minbytes=8".
#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>

#include "device/step.hpp"
#include "options.hpp"

namespace occl::bench {
namespace {

// More sizes than this is a typo (e.g. -i 1 over a GiB range), and it would overflow collIds.
constexpr uint64_t kMaxSizes = 1'000'000;
constexpr int kMaxLocalRanks = 256;
constexpr int kMaxBlocks = kMaxDaemonBlocks;  // desc.nBlocks: at most config.daemonBlocks

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

std::optional<int64_t> parseInt(std::string_view text) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

struct Flag {
  char shortName;  // '\0' when the flag has only a long spelling
  const char* longName;
  bool takesValue;
  // Validates `value` and stores it; returns what was expected, or "" when the value is good.
  std::function<std::string(std::string_view value, Options& o)> apply;
};

std::string intInRange(std::string_view v, int64_t lo, int64_t hi, int& out) {
  auto n = parseInt(v);
  if (!n || *n < lo || *n > hi) return "an integer in " + std::to_string(lo) + ".." + std::to_string(hi);
  out = static_cast<int>(*n);
  return "";
}

std::string bytesValue(std::string_view v, uint64_t& out) {
  auto n = parseBytes(v);
  if (!n) return "a byte count: an integer with an optional K, M or G suffix (e.g. 8, 64K, 1G)";
  out = *n;
  return "";
}

std::string dtypeList(std::string_view v, Options& o) {
  if (lower(v) == "all") {
    o.dtypes.clear();
    for (int t = 0; t < occlNumTypes; ++t) o.dtypes.push_back(t);
    return "";
  }
  auto t = dtypeFromName(v);
  if (!t) return "int8, uint8, int32, uint32, int64, uint64, half, float, double, bfloat16 or all";
  o.dtypes = {*t};
  return "";
}

std::string opList(std::string_view v, Options& o) {
  if (lower(v) == "all") {
    o.ops = {occlSum, occlProd, occlMax, occlMin, occlAvg};
    return "";
  }
  auto op = opFromName(v);
  if (!op) return "sum, prod, min, max, avg or all";
  o.ops = {*op};
  return "";
}

// "0,0,1": one CUDA device number per rank; the count is checked against -g once all flags are in.
std::string devlistValue(std::string_view v, std::vector<int>& out) {
  const char* expected = "a comma-separated list of CUDA device numbers (integers >= 0), one per rank of -g/--ngpus";
  std::vector<int> devices;
  for (size_t start = 0;;) {
    const size_t comma = v.find(',', start);
    auto n = parseInt(v.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    if (!n || *n < 0 || *n > std::numeric_limits<int>::max()) return expected;
    devices.push_back(static_cast<int>(*n));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  out = std::move(devices);
  return "";
}

// An MSCCL-IR file, or "ring" (occl's built-in name) so that scripts can pass it explicitly.
std::string algorithmValue(std::string_view v, std::string& out) {
  std::ifstream probe{std::string(v)};
  if (v != "ring" && (v.empty() || !probe || std::filesystem::is_directory(std::string(v))))
    return "a readable MSCCL-IR XML file (or ring)";
  out = std::string(v);
  return "";
}

const std::vector<Flag>& flags() {
  static const std::vector<Flag> table = {
      {'b', "minbytes", true, [](auto v, Options& o) { return bytesValue(v, o.minBytes); }},
      {'e', "maxbytes", true, [](auto v, Options& o) { return bytesValue(v, o.maxBytes); }},
      {'f', "stepfactor", true,
       [](auto v, Options& o) -> std::string {
         auto n = parseInt(v);
         if (!n || *n < 2) return "an integer >= 2";
         o.stepFactor = static_cast<uint64_t>(*n);
         return "";
       }},
      {'i', "stepbytes", true,
       [](auto v, Options& o) -> std::string {
         auto n = parseBytes(v);
         if (!n || *n == 0) return "a byte count >= 1 with an optional K, M or G suffix";
         o.stepBytes = *n;
         o.stepFactor = 1;  // the last of -f / -i wins
         return "";
       }},
      {'n', "iters", true, [](auto v, Options& o) { return intInRange(v, 1, 1'000'000'000, o.iters); }},
      {'w', "warmup_iters", true, [](auto v, Options& o) { return intInRange(v, 0, 1'000'000'000, o.warmupIters); }},
      {'\0', "small-iters", true, [](auto v, Options& o) { return intInRange(v, 0, 1'000'000'000, o.smallIters); }},
      {'\0', "small-max", true, [](auto v, Options& o) { return bytesValue(v, o.smallMaxBytes); }},
      {'\0', "settle-iters", true, [](auto v, Options& o) { return intInRange(v, 0, 1'000'000'000, o.settleIters); }},
      {'c', "check", true,
       [](auto v, Options& o) -> std::string {
         if (v != "0" && v != "1") return "0 or 1";
         o.check = v == "1";
         return "";
       }},
      {'d', "datatype", true, [](auto v, Options& o) { return dtypeList(v, o); }},
      {'o', "op", true, [](auto v, Options& o) { return opList(v, o); }},
      {'r', "root", true, [](auto v, Options& o) { return intInRange(v, 0, std::numeric_limits<int>::max(), o.root); }},
      {'g', "ngpus", true, [](auto v, Options& o) { return intInRange(v, 1, kMaxLocalRanks, o.localRanks); }},
      {'\0', "coll", true,
       [](auto v, Options& o) -> std::string {
         auto c = collFromName(v);
         if (!c) return "allreduce, allgather, reducescatter, reduce, broadcast, alltoall or sendrecv";
         o.coll = *c;
         o.collGiven = true;
         return "";
       }},
      {'\0', "backend", true,
       [](auto v, Options& o) -> std::string {
         const std::string s = lower(v);
         if (s == "host") o.backend = occlBackendHost;
         else if (s == "cuda") o.backend = occlBackendCuda;
         else if (s == "simt") o.backend = occlBackendSimt;
         else if (s == "auto") o.backend = occlBackendAuto;
         else return "host, cuda, simt or auto";
         return "";
       }},
      {'\0', "devlist", true, [](auto v, Options& o) { return devlistValue(v, o.devlist); }},
      {'\0', "algo", true, [](auto v, Options& o) { return algorithmValue(v, o.algorithm); }},
      {'\0', "blocks", true, [](auto v, Options& o) { return intInRange(v, 1, kMaxBlocks, o.blocks); }},
      {'\0', "shared-buffers", true, [](auto v, Options& o) { return intInRange(v, 0, 1, o.sharedBuffers); }},
      {'\0', "compare", true,
       [](auto v, Options& o) -> std::string {
         if (lower(v) != "nccl") return "nccl";
         o.compareNccl = true;
         return "";
       }},
      {'\0', "json", true,
       [](auto v, Options& o) -> std::string {
         if (v.empty()) return "an output file path";
         o.jsonPath = std::string(v);
         return "";
       }},
      {'\0', "mpi", false, [](auto, Options& o) { o.mpi = true; return std::string(); }},
      {'\0', "timeline", false, [](auto, Options& o) { o.timeline = true; return std::string(); }},
      {'\0', "submit", true,
       [](auto v, Options& o) -> std::string {
         const std::string mode = lower(v);
         if (mode == "plain") o.submit = SubmitMode::Plain;
         else if (mode == "gated") o.submit = SubmitMode::Gated;
         else if (mode == "stream") o.submit = SubmitMode::Stream;
         else return "plain, gated or stream";
         return "";
       }},
      {'h', "help", false, [](auto, Options& o) { o.help = true; return std::string(); }},
  };
  return table;
}

std::string flagLabel(const Flag& f) {
  std::string label = f.shortName ? std::string("-") + f.shortName + "/" : "";
  return label + "--" + f.longName;
}

const Flag* findLong(std::string_view name) {
  for (const Flag& f : flags())
    if (name == f.longName) return &f;
  return nullptr;
}

const Flag* findShort(char c) {
  for (const Flag& f : flags())
    if (f.shortName == c) return &f;
  return nullptr;
}

// Cross-flag rules, checked once every flag is known.
std::string checkConsistency(const Options& o) {
  if (o.minBytes > o.maxBytes)
    return "-b/--minbytes (" + std::to_string(o.minBytes) + ") must not exceed -e/--maxbytes (" +
           std::to_string(o.maxBytes) + ")";
  if (o.stepFactor > 1 && o.minBytes == 0)
    return "-b/--minbytes: expected >= 1 with -f/--stepfactor (0 times a factor never grows)";
  if (!o.devlist.empty() && static_cast<int>(o.devlist.size()) != o.localRanks)
    return "--devlist: " + std::to_string(o.devlist.size()) + " device(s) given; expected " +
           std::to_string(o.localRanks) + ", one per rank of -g/--ngpus " + std::to_string(o.localRanks);
  const char* hostBackend = o.backend == occlBackendHost ? "host" : o.backend == occlBackendSimt ? "simt" : nullptr;
  if (!o.devlist.empty() && hostBackend != nullptr)
    return std::string("--devlist names CUDA devices, but --backend ") + hostBackend +
           " runs the ranks on host threads; expected --backend cuda (or auto)";
  if (o.compareNccl && hostBackend != nullptr)
    return std::string("--compare nccl: NCCL runs on GPUs, but --backend ") + hostBackend +
           " runs occl on host threads; expected --backend cuda (or auto)";
  if (o.compareNccl && o.coll == Coll::SendRecv)
    return "--compare nccl: sendrecv has no NCCL comparison; expected allreduce, allgather, reducescatter, reduce, "
           "broadcast or alltoall";
  if (sizeSequence(o).size() > kMaxSizes)
    return "-i/--stepbytes: the range -b..-e holds more than " + std::to_string(kMaxSizes) +
           " sizes; expected a larger step";
  return "";
}

std::string basename(const std::string& path) { return std::filesystem::path(path).filename().string(); }

}  // namespace

ParsedArgs parseArgs(const std::vector<std::string>& args) {
  ParsedArgs out;
  Options& o = out.options;
  if (!args.empty())
    if (auto c = collFromName(basename(args[0]))) o.coll = *c, o.collGiven = true;
  bool sawPositional = false;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    const Flag* flag = nullptr;
    std::optional<std::string> inlineValue;
    if (a.rfind("--", 0) == 0 && a.size() > 2) {
      const size_t eq = a.find('=');
      flag = findLong(std::string_view(a).substr(2, eq == std::string::npos ? std::string::npos : eq - 2));
      if (eq != std::string::npos) inlineValue = a.substr(eq + 1);
    } else if (a.size() >= 2 && a[0] == '-' && !std::isdigit(static_cast<unsigned char>(a[1]))) {
      flag = findShort(a[1]);
      if (a.size() > 2) inlineValue = a.substr(2);
    } else {
      auto c = collFromName(a);
      if (!c) {
        out.error = "unexpected argument \"" + a +
                    "\": expected a collective (allreduce, allgather, reducescatter, reduce, broadcast, alltoall, "
                    "sendrecv) or a flag; see --help";
        return out;
      }
      if (sawPositional) {
        out.error = "unexpected second collective \"" + a + "\": occl-bench measures one collective per run";
        return out;
      }
      sawPositional = true;
      o.coll = *c;
      o.collGiven = true;
      continue;
    }
    if (flag == nullptr) {
      out.error = "unknown flag \"" + a + "\"; see --help";
      return out;
    }
    std::string value;
    if (flag->takesValue) {
      if (inlineValue) {
        value = *inlineValue;
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        out.error = flagLabel(*flag) + ": missing value";
        return out;
      }
    } else if (inlineValue) {
      out.error = flagLabel(*flag) + ": takes no value (got \"" + *inlineValue + "\")";
      return out;
    }
    if (std::string expected = flag->apply(value, o); !expected.empty()) {
      out.error = flagLabel(*flag) + ": invalid value \"" + value + "\"; expected " + expected;
      return out;
    }
  }
  if (!o.help) out.error = checkConsistency(o);
  return out;
}

IterCounts itersFor(const Options& o, uint64_t bytes) {
  if (o.smallIters == 0 || bytes > o.smallMaxBytes) return {o.warmupIters, o.iters};
  return {std::max(o.warmupIters, o.smallIters / 10), o.smallIters};
}

int settleWarmUpIters(const Options& o, uint64_t bytes) { return std::max(itersFor(o, bytes).warmup, o.settleIters); }

std::string iterationLines(const Options& o) {
  std::string s;
  if (o.smallIters != 0)
    s = "# sizes up to " + std::to_string(o.smallMaxBytes) + " B: warmup iters: " + std::to_string(itersFor(o, 0).warmup) +
        " iters: " + std::to_string(o.smallIters) + "\n";
  if (o.settleIters != 0) s += "# settle iters: " + std::to_string(o.settleIters) + " (before the first row)\n";
  return s;
}

std::vector<uint64_t> sizeSequence(const Options& o) {
  std::vector<uint64_t> sizes;
  for (uint64_t s = o.minBytes; s <= o.maxBytes && sizes.size() <= kMaxSizes;) {
    sizes.push_back(s);
    const uint64_t next = o.stepFactor > 1 ? s * o.stepFactor : s + o.stepBytes;
    // Stop at the top of the range instead of wrapping around 2^64.
    if (next <= s || (o.stepFactor > 1 && next / o.stepFactor != s)) break;
    s = next;
  }
  return sizes;
}

std::string sweepUsage() {
  return "  -b,--minbytes N        smallest size (K/M/G suffixes), default 32M\n"
         "  -e,--maxbytes N        largest size, default 32M\n"
         "  -f,--stepfactor N      multiply the size by N between runs\n"
         "  -i,--stepbytes N       add N bytes between runs (default 1M; the last of -f/-i wins)\n"
         "  -n,--iters N           timed iterations per size, default 20\n"
         "  -w,--warmup_iters N    untimed iterations per size, default 1\n"
         "  --small-iters N        sizes up to --small-max run N timed iterations and N/10 (at\n"
         "                         least -w) untimed instead; default 0: every size runs -n\n"
         "  --small-max N          the largest size --small-iters applies to, default 8K\n"
         "  --settle-iters N       the warm-up at the smallest size before the first row runs\n"
         "                         at least N iterations (the scheduler settling), default 0\n"
         "  -c,--check 0|1         verify every element, default 1\n";
}

std::string usage(const std::string& program) {
  return "usage: " + program +
         " [COLLECTIVE] [flags]\n"
         "  COLLECTIVE (or --coll): allreduce allgather reducescatter reduce broadcast alltoall sendrecv\n"
         "                          (nccl-tests names such as all_reduce_perf work too, also as argv[0])\n" +
         sweepUsage() +
         "  -d,--datatype T        int8 uint8 int32 uint32 int64 uint64 half float double bfloat16 | all\n"
         "  -o,--op OP             sum prod min max avg | all (reducing collectives only)\n"
         "  -r,--root R            root of reduce and broadcast, default 0\n"
         "  -g,--ngpus N           ranks in this process (threads), default 1\n"
         "  --backend B            host | cuda | simt | auto, default auto: host ranks, or cuda when\n"
         "                         --devlist or --compare nccl asks for GPUs. cuda: device buffers,\n"
         "                         rank r on device r % (CUDA devices) unless --devlist says otherwise.\n"
         "                         simt: the CUDA daemon's code on emulated blocks of host threads,\n"
         "                         with its bus crossings counted (footer \"host crossings\")\n"
         "  --devlist D0,D1,...    CUDA device of each rank of -g (as occlCommInitAll's devlist;\n"
         "                         repeats allowed): as many entries as -g\n"
         "  --algo FILE.xml        MSCCL-IR algorithm (occlCollDesc_t.algorithm)\n"
         "  --blocks N             daemon blocks per collective (occlCollDesc_t.nBlocks)\n"
         "  --shared-buffers 0|1   buffers from occlMemAlloc, registered with sharedBuffers (host\n"
         "                         ranks; default 1 for processes under a launcher, else 0): ranks\n"
         "                         as processes then run the peer AllReduce, as threads do\n"
         "  --compare nccl         also time NCCL on the same sizes and GPUs, one rank per GPU\n"
         "                         (builds with NCCL; ranks as threads on distinct devices)\n"
         "  --json FILE            also write the results as JSON\n"
         "  --mpi                  one rank per process from the launcher's environment\n"
         "                         (implied when OMPI_COMM_WORLD_SIZE or WORLD_SIZE is set)\n"
         "  --timeline             keep the daemon's timeline (config.timelineDepth) and print, per\n"
         "                         row, when the timed submissions were tried, moved data and were\n"
         "                         done after the daemon took them (medians, rank 0)\n"
         "  --submit M             plain | gated | stream, default plain: occlSubmit; occlSubmitGated\n"
         "                         with the gate opened right after; occlSubmitOnStream on a stream\n"
         "                         of the rank's device, synchronised each run (--backend cuda)\n"
         "  -h,--help              this text\n";
}

}  // namespace occl::bench
