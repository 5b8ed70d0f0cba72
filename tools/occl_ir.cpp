// occl-ir: checks MSCCL-IR files the way occl would load them, before a job finds out at
// registration time, and writes occl's own algorithms as MSCCL-IR to start a program from.
#include <algorithm>
#include <climits>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/flags.hpp"
#include "device/coll_types.hpp"
#include "host/config.hpp"
#include "ir_loader/msccl_ir.hpp"
#include "ir_loader/ring.hpp"
#include "ir_loader/validate.hpp"
#include "queues/fifo.hpp"

namespace {

constexpr const char* kSynopsis =
    "usage: occl-ir check FILE...      (FILE '-': standard input)\n"
    "       occl-ir emit COLL --ranks N [--channels C] [--root R] [--algo ALGO] [--name NAME]\n"
    "       occl-ir --help | --version\n";

constexpr const char* kDetails =
    "\n"
    "check   parse and validate each MSCCL-IR XML file (the MSCCLang compiler's output): attributes,\n"
    "        limits, buffer bounds, peers, send/receive matching across ranks, dependencies and\n"
    "        deadlock freedom. Prints a summary of each valid file (ranks, threadblocks, steps, the\n"
    "        connector slots it needs, the connector memory it costs with the default\n"
    "        configuration, connections) on stdout and each problem, as\n"
    "        FILE: line N, <element>: message, on stderr. Attributes occl does not know are ignored,\n"
    "        as MSCCL ignores them, with a warning (FILE: warning: ...) on stderr.\n"
    "emit    write one of occl's algorithms as MSCCL-IR XML on stdout: what occl runs when a\n"
    "        registration names no program, as a program that `check` accepts and\n"
    "        occlAlgorithmLoad runs. COLL is allreduce, allgather, reducescatter (ALGO ring),\n"
    "        reduce, broadcast (ALGO chain, --root R, default 0) or alltoall (ALGO direct, one\n"
    "        threadblock per peer), spelled as occl-bench and Python spell them or as MSCCL-IR\n"
    "        does (all_reduce, reduce_scatter: case, '_' and '-' do not matter); ALGO allpairs\n"
    "        writes an all-pairs allreduce (in place, one channel, N threadblocks: MSCCLang's\n"
    "        allreduce_allpairs). NAME defaults to ALGO_COLL. The program splits a count into\n"
    "        whole chunks only (nchunksperloop), as every MSCCL-IR program does.\n"
    "\n"
    "emit's flags:\n";

constexpr const char* kExitStatus =
    "\n"
    "exit status: 0 every file is valid / the program was written, 1 some file is not valid,\n"
    "             2 usage error\n";

// A short usage error: the message and the synopsis, not the whole help.
int usageError(const std::string& message) {
  std::fprintf(stderr, "occl-ir: %s\n%s", message.c_str(), kSynopsis);
  return 2;
}

// The connector FIFOs a rank maps for `p` with the default configuration on one host: the
// program's slots or the default's, whichever is more, for each connector end of the rank.
std::string memoryLine(const occl::ir::Program& p) {
  occlConfig_t defaults;
  occlConfigInit(&defaults);
  const auto slots = static_cast<uint32_t>(std::max(defaults.connectorSlots, p.minConnectorSlots));
  const size_t perEnd = occl::fifoBytes(slots, occl::host::kSlotBytesOneHost);
  size_t most = 0;
  for (const occl::ir::RankProgram& r : p.ranks) {
    size_t ends = 0;
    for (const occl::ir::BlockProgram& b : r.blocks)
      ends += occl::ir::connectionPeers(b, true).size() + occl::ir::connectionPeers(b, false).size();
    most = std::max(most, ends);
  }
  return absl::StrFormat(
      "  connector memory with the default configuration (%d slots of %d KiB, one host): up to %d connector ends of "
      "%d slots per rank, %.1f MiB\n",
      defaults.connectorSlots, occl::host::kSlotBytesOneHost / 1024, most, slots,
      static_cast<double>(most * perEnd) / (1 << 20));
}

int check(const std::vector<std::string>& files) {
  int status = 0;
  for (const std::string& arg : files) {
    const bool stdinFile = arg == "-";
    const std::string file = stdinFile ? "<stdin>" : arg;
    occl::ir::LoadResult r;
    if (stdinFile) {
      std::string text;
      char chunk[1 << 16];
      for (size_t n; (n = std::fread(chunk, 1, sizeof chunk, stdin)) > 0;) text.append(chunk, n);
      r = occl::ir::loadMscclIrString(text, file);
    } else {
      r = occl::ir::loadMscclIrFile(file);
    }
    if (r.ok()) {
      std::fputs(occl::ir::formatWarnings(r.warnings, file).c_str(), stderr);
      std::printf("%s: ok\n%s%s", file.c_str(), occl::ir::summarize(*r.program).c_str(), memoryLine(*r.program).c_str());
    } else {
      std::fprintf(stderr, "%s: %zu error(s)\n%s", file.c_str(), r.errors.size(),
                   occl::ir::formatErrors(r.errors, file).c_str());
      status = 1;
    }
  }
  return status;
}

struct EmitArgs {
  std::string coll, algo, name;
  int type = occlCollAllReduce;  // of coll
  int ranks = 0, channels = 1, root = 0;
  bool ranksGiven = false, rootGiven = false, channelsGiven = false, algoGiven = false, nameGiven = false;
};

// emit's flags; their ranges are checked by generate(), which knows the collective.
std::vector<occl::cli::Flag> emitFlags(EmitArgs& a) {
  auto integer = [](int& field, bool& given) {
    return [&field, &given](std::string_view v) -> std::string {
      auto n = occl::cli::parseInt(v);
      if (!n || *n < INT32_MIN || *n > INT32_MAX) return "an integer";
      field = static_cast<int>(*n);
      given = true;
      return "";
    };
  };
  auto text = [](std::string& field, bool& given) {
    return [&field, &given](std::string_view v) -> std::string {
      if (v.empty()) return "a non-empty name";
      field = std::string(v);
      given = true;
      return "";
    };
  };
  return {
      {'\0', "ranks", "N", "ranks of the program (required)", integer(a.ranks, a.ranksGiven)},
      {'\0', "channels", "C", "threadblocks per rank of ring and chain programs, default 1",
       integer(a.channels, a.channelsGiven)},
      {'\0', "root", "R", "root of reduce and broadcast, default 0", integer(a.root, a.rootGiven)},
      {'\0', "algo", "ALGO", "ring, chain, direct (the collective's own) or allpairs (allreduce)",
       text(a.algo, a.algoGiven)},
      {'\0', "name", "NAME", "the program's name attribute, default ALGO_COLL", text(a.name, a.nameGiven)},
  };
}

// The program `a` names, or a message saying which argument is wrong.
std::variant<occl::ir::Program, std::string> generate(const EmitArgs& a) {
  using occl::ir::kMaxChannels;
  using occl::ir::kMaxRanks;
  if (a.ranks < 1 || a.ranks > kMaxRanks) return absl::StrFormat("--ranks %d: expected 1..%d", a.ranks, kMaxRanks);
  if (a.channels < 1 || a.channels > kMaxChannels)
    return absl::StrFormat("--channels %d: expected 1..%d", a.channels, kMaxChannels);
  const occl::CollTypeInfo& info = occl::collInfo(a.type);
  const bool rooted = info.rooted;
  if (a.rootGiven && !rooted) return absl::StrFormat("--root: %s has no root", a.coll);
  if (rooted && (a.root < 0 || a.root >= a.ranks))
    return absl::StrFormat("--root %d: expected a rank in 0..%d", a.root, a.ranks - 1);
  const std::string defaultAlgo = info.builtIn;
  const std::string algo = a.algo.empty() ? defaultAlgo : a.algo;
  if (algo == "allpairs") {
    if (a.coll != "allreduce") return absl::StrFormat("--algo allpairs: an allreduce algorithm, not %s", a.coll);
    if (a.ranks < 2) return std::string("--algo allpairs: expected --ranks 2 or more");
    if (a.channelsGiven) return std::string("--channels: allpairs has one channel");
    return occl::ir::makeAllPairsAllReduce(a.ranks);
  }
  if (algo != defaultAlgo)
    return absl::StrFormat("--algo %s: expected %s or, for allreduce, allpairs", algo, defaultAlgo);
  switch (a.type) {
    case occlCollAllReduce: return occl::ir::makeRingAllReduce(a.ranks, a.channels);
    case occlCollAllGather: return occl::ir::makeRingAllGather(a.ranks, a.channels);
    case occlCollReduceScatter: return occl::ir::makeRingReduceScatter(a.ranks, a.channels);
    case occlCollReduce: return occl::ir::makeChainReduce(a.ranks, a.channels, a.root);
    case occlCollBroadcast: return occl::ir::makeChainBroadcast(a.ranks, a.channels, a.root);
    default:
      if (a.channelsGiven) return std::string("--channels: alltoall has one threadblock per peer");
      return occl::ir::makeAllToAll(a.ranks, a.ranks - 1);  // one peer per block, as MSCCL-IR needs
  }
}

int emit(EmitArgs& a) {
  a.type = occl::collTypeFromAnyName(a.coll);
  // MSCCL-IR's collectives (device/coll_types.hpp): send and recv have none.
  std::vector<std::string> names;
  for (const occl::CollTypeInfo& c : occl::kCollTypes)
    if (c.irName != nullptr) names.push_back(c.name);
  if (a.type == occlNumCollTypes || occl::collInfo(a.type).irName == nullptr)
    return usageError(absl::StrFormat("emit %s: expected one of %s", a.coll, absl::StrJoin(names, ", ")));
  a.coll = occl::collInfo(a.type).irName;  // the program's and the default name's spelling
  if (!a.ranksGiven) return usageError("emit needs --ranks N");
  std::variant<occl::ir::Program, std::string> generated = generate(a);
  if (const auto* message = std::get_if<std::string>(&generated)) return usageError(*message);
  occl::ir::Program& p = std::get<occl::ir::Program>(generated);
  p.name = a.name.empty() ? absl::StrFormat("%s_%s", p.name, a.coll) : a.name;
  occl::Result<std::string> xml = occl::ir::writeMscclIr(p);
  if (!xml.ok()) {
    std::fprintf(stderr, "occl-ir: %s\n", xml.status().message.c_str());
    return 1;
  }
  std::fputs(xml.value().c_str(), stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  EmitArgs emitArgs;
  const std::vector<occl::cli::Flag> flags = emitFlags(emitArgs);
  const occl::cli::Parsed parsed = occl::cli::parse(std::vector<std::string>(argv + 1, argv + argc), flags);
  if (parsed.help) {
    std::printf("%s%s%s%s", kSynopsis, kDetails, occl::cli::usage(flags).c_str(), kExitStatus);
    return 0;
  }
  if (parsed.version) {
    std::printf("%s\n", occl::cli::versionLine("occl-ir").c_str());
    return 0;
  }
  if (!parsed.ok()) return usageError(parsed.error);
  const std::vector<std::string>& words = parsed.positionals;
  if (words.empty()) return usageError("expected a command: check or emit");
  const std::vector<std::string> rest(words.begin() + 1, words.end());
  if (words[0] == "check") {
    if (rest.empty()) return usageError("check needs at least one FILE ('-' for standard input)");
    const EmitArgs& e = emitArgs;
    if (e.ranksGiven || e.channelsGiven || e.rootGiven || e.algoGiven || e.nameGiven)
      return usageError("--ranks, --channels, --root, --algo and --name are emit's flags; check takes files only");
    return check(rest);
  }
  if (words[0] == "emit") {
    if (rest.size() != 1) return usageError("emit takes one collective (got " + std::to_string(rest.size()) + ")");
    emitArgs.coll = rest[0];
    return emit(emitArgs);
  }
  return usageError("unknown command \"" + words[0] + "\": expected check or emit");
}
