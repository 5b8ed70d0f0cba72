// occl-bench's flags, as a table for src/cli's parser: nccl-tests' flags first (with their
// meanings, or only the value occl has a meaning for), then occl's own.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <limits>

#include "device/step.hpp"
#include "options.hpp"

namespace occl::bench {
namespace {

using cli::Flag;
using cli::intInRange;
using cli::parseInt;

// More sizes than this is a typo (e.g. -i 1 over a GiB range), and it would overflow collIds.
constexpr uint64_t kMaxSizes = 1'000'000;
constexpr int kMaxLocalRanks = 256;
constexpr int kMaxBlocks = kMaxDaemonBlocks;  // desc.nBlocks: at most config.daemonBlocks

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

std::string jsonPathValue(std::string_view v, std::string& out) {
  if (v.empty()) return "an output file path";
  out = std::string(v);
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

// -b -e -f -i -n -w, the small-size iterations and -c: the sweep, which the baselines share.
std::vector<Flag> sweepFlags(Options& o) {
  return {
      {'b', "minbytes", "N", "smallest size (K/M/G suffixes), default 32M",
       [&o](auto v) { return bytesValue(v, o.minBytes); }},
      {'e', "maxbytes", "N", "largest size, default 32M", [&o](auto v) { return bytesValue(v, o.maxBytes); }},
      {'f', "stepfactor", "N", "multiply the size by N between runs",
       [&o](auto v) -> std::string {
         auto n = parseInt(v);
         if (!n || *n < 2) return "an integer >= 2";
         o.stepFactor = static_cast<uint64_t>(*n);
         return "";
       }},
      {'i', "stepbytes", "N", "add N bytes between runs (default 1M; the last of -f/-i wins)",
       [&o](auto v) -> std::string {
         auto n = parseBytes(v);
         if (!n || *n == 0) return "a byte count >= 1 with an optional K, M or G suffix";
         o.stepBytes = *n;
         o.stepFactor = 1;  // the last of -f / -i wins
         return "";
       }},
      {'n', "iters", "N", "timed iterations per size, default 20",
       [&o](auto v) { return intInRange(v, 1, 1'000'000'000, o.iters); }},
      {'w', "warmup_iters", "N", "untimed iterations per size, default 5",
       [&o](auto v) { return intInRange(v, 0, 1'000'000'000, o.warmupIters); }},
      {'\0', "small-iters", "N",
       "sizes up to --small-max run N timed iterations and N/10 (at\nleast -w) untimed instead; default 0: every size runs -n",
       [&o](auto v) { return intInRange(v, 0, 1'000'000'000, o.smallIters); }},
      {'\0', "small-max", "N", "the largest size --small-iters applies to, default 8K",
       [&o](auto v) { return bytesValue(v, o.smallMaxBytes); }},
      {'\0', "settle-iters", "N",
       "the warm-up at the smallest size before the first row runs\nat least N iterations (the scheduler settling), default 0",
       [&o](auto v) { return intInRange(v, 0, 1'000'000'000, o.settleIters); }},
      {'c', "check", "N", "checked runs after the timed ones, each on fresh inputs and\nverifying every element; default 1, 0: none",
       [&o](auto v) { return intInRange(v, 0, 1'000'000, o.check); }},
  };
}

std::vector<Flag> allFlags(Options& o) {
  std::vector<Flag> t = sweepFlags(o);
  std::vector<Flag> rest = {
      {'t', "nthreads", "N", "threads per process, each running -g ranks: -t x -g ranks as\nthreads of this process (nccl-tests' meaning), default 1",
       [&o](auto v) { return intInRange(v, 1, kMaxLocalRanks, o.threads); }},
      {'g', "ngpus", "N", "ranks per thread, default 1", [&o](auto v) { return intInRange(v, 1, kMaxLocalRanks, o.gpus); }},
      {'d', "datatype", "T", "int8 uint8 int32 uint32 int64 uint64 half float double bfloat16\nf8e4m3 f8e5m2 | all",
       [&o](auto v) { return dtypeList(v, o); }},
      {'o', "op", "OP", "sum prod min max avg | all (reducing collectives only)", [&o](auto v) { return opList(v, o); }},
      {'r', "root", "R", "root of reduce and broadcast, default 0",
       [&o](auto v) { return intInRange(v, 0, std::numeric_limits<int>::max(), o.root); }},
      {'a', "average", "0|1|2|3", "a row's time from the ranks' times: 0 rank 0's, 1 the mean,\n2 the least, 3 the most (default 3; nccl-tests' default is 1)",
       [&o](auto v) { return intInRange(v, 0, 3, o.average); }},
      {'T', "timeout", "S", "fail a collective that has not completed after S seconds\n(config.collTimeoutMs), default occl's",
       [&o](auto v) { return intInRange(v, 1, 1'000'000, o.timeoutS); }},
      {'p', "parallel_init", "0|1", "accepted for nccl-tests' scripts: a process's ranks always\ninitialize together (occlCommInitAll)",
       [](auto v) -> std::string { return v == "0" || v == "1" ? "" : "0 or 1"; }},
      {'J', "output_file", "FILE", "as --json", [&o](auto v) { return jsonPathValue(v, o.jsonPath); }},
      cli::onlyValue('z', "blocking", "1", "occl-bench waits for each iteration's completion before the next, as nccl-tests -z 1"),
      cli::onlyValue('C', "report_cputime", "1", "occl-bench's times are host clock times, as nccl-tests -C 1"),
      cli::onlyValue('m', "agg_iters", "1", "occl has no grouped submission yet"),
      cli::onlyValue('N', "run_cycles", "1", "run occl-bench again for another cycle"),
      cli::onlyValue('G', "cudagraph", "0", "occl's collectives are not captured in CUDA graphs"),
      cli::onlyValue('y', "stream_null", "0", "occl submits on the communicator's queue, not a CUDA stream; see --submit"),
      cli::onlyValue('R', "local_register", "0", "see --shared-buffers for occl's registered buffers"),
      cli::onlyValue('S', "report_timestamps", "0", "not in occl-bench's report"),
      cli::onlyValue('M', "memory_report", "0", "not in occl-bench's report"),
      {'\0', "coll", "C", "allreduce allgather reducescatter reduce broadcast alltoall sendrecv gather\nscatter (as the positional COLLECTIVE)",
       [&o](auto v) -> std::string {
         auto c = collFromName(v);
         if (!c) return "allreduce, allgather, reducescatter, reduce, broadcast, alltoall, sendrecv, gather or scatter";
         o.coll = *c;
         o.collGiven = true;
         return "";
       }},
      {'\0', "backend", "B",
       "host | cuda | simt | auto, default auto: host ranks, or cuda when\n--devlist or --compare nccl asks for GPUs. cuda: device buffers,\nrank r on device r % (CUDA devices) unless --devlist says otherwise.\nsimt: the CUDA daemon's code on emulated blocks of host threads,\nwith its bus crossings counted (footer \"host crossings\")",
       [&o](auto v) -> std::string {
         const std::string s = lower(v);
         if (s == "host") o.backend = occlBackendHost;
         else if (s == "cuda") o.backend = occlBackendCuda;
         else if (s == "simt") o.backend = occlBackendSimt;
         else if (s == "auto") o.backend = occlBackendAuto;
         else return "host, cuda, simt or auto";
         return "";
       }},
      {'\0', "devlist", "D0,D1,...", "CUDA device of each rank (as occlCommInitAll's devlist;\nrepeats allowed): as many entries as ranks",
       [&o](auto v) { return devlistValue(v, o.devlist); }},
      {'\0', "algo", "FILE.xml", "MSCCL-IR algorithm (occlCollDesc_t.algorithm)",
       [&o](auto v) { return algorithmValue(v, o.algorithm); }},
      {'\0', "blocks", "N", "daemon blocks per collective (occlCollDesc_t.nBlocks)",
       [&o](auto v) { return intInRange(v, 1, kMaxBlocks, o.blocks); }},
      {'\0', "max-count", "N",
       "register every size for N bytes with desc.variableCount and submit\neach with its own count "
       "(occlSubmitCount); N >= -e/--maxbytes",
       [&o](auto v) { return bytesValue(v, o.maxCountBytes); }},
      {'\0', "shared-buffers", "0|1",
       "buffers from occlMemAlloc, registered with sharedBuffers (host\nranks; default 1 for processes under a launcher, else 0): ranks\nas processes then run the peer AllReduce, as threads do",
       [&o](auto v) { return intInRange(v, 0, 1, o.sharedBuffers); }},
      {'\0', "compare", "nccl", "also time NCCL on the same sizes and GPUs, one rank per GPU\n(builds with NCCL; ranks as threads on distinct devices)",
       [&o](auto v) -> std::string {
         if (lower(v) != "nccl") return "nccl";
         o.compareNccl = true;
         return "";
       }},
      {'\0', "json", "FILE", "also write the results as JSON", [&o](auto v) { return jsonPathValue(v, o.jsonPath); }},
      {'\0', "mpi", "", "one rank per process from the launcher's environment\n(implied when OMPI_COMM_WORLD_SIZE or WORLD_SIZE is set)",
       [&o](auto) {
         o.mpi = true;
         return std::string();
       }},
      {'\0', "timeline", "",
       "keep the daemon's timeline (config.timelineDepth) and print, per\nrow, when the timed submissions were tried, moved data and were\ndone after the daemon took them (medians, rank 0)",
       [&o](auto) {
         o.timeline = true;
         return std::string();
       }},
      {'\0', "submit", "M",
       "plain | gated | stream, default plain: occlSubmit; occlSubmitGated\nwith the gate opened right after; occlSubmitOnStream on a stream\nof the rank's device, synchronised each run (--backend cuda)",
       [&o](auto v) -> std::string {
         const std::string mode = lower(v);
         if (mode == "plain") o.submit = SubmitMode::Plain;
         else if (mode == "gated") o.submit = SubmitMode::Gated;
         else if (mode == "stream") o.submit = SubmitMode::Stream;
         else return "plain, gated or stream";
         return "";
       }},
  };
  for (Flag& f : rest) t.push_back(std::move(f));
  return t;
}

// Cross-flag rules, checked once every flag is known.
std::string checkConsistency(const Options& o) {
  if (o.minBytes > o.maxBytes)
    return "-b/--minbytes (" + std::to_string(o.minBytes) + ") must not exceed -e/--maxbytes (" +
           std::to_string(o.maxBytes) + ")";
  if (o.maxCountBytes != 0 && o.maxCountBytes < o.maxBytes)
    return "--max-count (" + std::to_string(o.maxCountBytes) + ") must be at least -e/--maxbytes (" +
           std::to_string(o.maxBytes) + ")";
  if (o.maxCountBytes != 0 && o.submit != SubmitMode::Plain)
    return "--max-count: a gated or stream submission has its registered count; expected --submit plain";
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
           "broadcast, alltoall, gather or scatter";
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
  const cli::Parsed parsed = cli::parse(std::vector<std::string>(args.begin() + (args.empty() ? 0 : 1), args.end()),
                                        allFlags(o));
  o.help = parsed.help;
  o.version = parsed.version;
  if (!parsed.ok()) {
    out.error = parsed.error + "; see --help";
    return out;
  }
  if (parsed.positionals.size() > 1) {
    out.error = "unexpected second collective \"" + parsed.positionals[1] + "\": occl-bench measures one collective per run";
    return out;
  }
  for (const std::string& a : parsed.positionals) {
    auto c = collFromName(a);
    if (!c) {
      out.error = "unexpected argument \"" + a +
                  "\": expected a collective (allreduce, allgather, reducescatter, reduce, broadcast, alltoall, "
                  "sendrecv, gather, scatter) or a flag; see --help";
      return out;
    }
    o.coll = *c;
    o.collGiven = true;
  }
  if (int64_t{o.threads} * o.gpus > kMaxLocalRanks) {
    out.error = "-t/--nthreads " + std::to_string(o.threads) + " x -g/--ngpus " + std::to_string(o.gpus) +
                ": expected at most " + std::to_string(kMaxLocalRanks) + " ranks in a process";
    return out;
  }
  o.localRanks = o.threads * o.gpus;
  if (!o.help && !o.version) out.error = checkConsistency(o);
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
  Options scratch;
  return cli::usage(sweepFlags(scratch));
}

std::string usage(const std::string& program) {
  Options scratch;
  return "usage: " + program +
         " [COLLECTIVE] [flags]\n"
         "  COLLECTIVE (or --coll): allreduce allgather reducescatter reduce broadcast alltoall sendrecv\n"
         "                          gather scatter\n"
         "                          (nccl-tests names such as all_reduce_perf work too, also as argv[0])\n" +
         cli::usage(allFlags(scratch));
}

}  // namespace occl::bench
