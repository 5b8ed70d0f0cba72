// occl-ir: checks MSCCL-IR files the way occl would load them, before a job finds out at
// registration time, and writes occl's own algorithms as MSCCL-IR to start a program from.
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "device/coll_types.hpp"
#include "host/config.hpp"
#include "ir_loader/msccl_ir.hpp"
#include "ir_loader/ring.hpp"
#include "ir_loader/validate.hpp"
#include "queues/fifo.hpp"

namespace {

constexpr const char* kUsage =
    "usage: occl-ir check FILE...\n"
    "       occl-ir emit COLL --ranks N [--channels C] [--root R] [--algo ALGO] [--name NAME]\n"
    "       occl-ir --help\n"
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
    "        occlAlgorithmLoad runs. COLL is allreduce, allgather, reduce_scatter (ALGO ring),\n"
    "        reduce, broadcast (ALGO chain, --root R, default 0) or alltoall (ALGO direct, one\n"
    "        threadblock per peer); ALGO allpairs writes an all-pairs allreduce (in place, one\n"
    "        channel, N threadblocks: MSCCLang's allreduce_allpairs). --channels C (ring, chain):\n"
    "        threadblocks per rank, default 1. NAME defaults to ALGO_COLL. The program splits a\n"
    "        count into whole chunks only (nchunksperloop), as every MSCCL-IR program does.\n"
    "\n"
    "exit status: 0 every file is valid / the program was written, 1 some file is not valid,\n"
    "             2 usage error\n";

int usageError(const std::string& message) {
  std::fprintf(stderr, "occl-ir: %s\n\n%s", message.c_str(), kUsage);
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
  for (const std::string& file : files) {
    occl::ir::LoadResult r = occl::ir::loadMscclIrFile(file);
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
  bool rootGiven = false, channelsGiven = false;
};

std::optional<int> parseInt(std::string_view text) {
  int v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
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

int emit(const std::vector<std::string>& args) {
  EmitArgs a;
  a.coll = args[0];
  // MSCCL-IR's collective names (device/coll_types.hpp): send and recv have none.
  std::vector<std::string> names;
  for (const occl::CollTypeInfo& c : occl::kCollTypes)
    if (c.irName != nullptr) names.push_back(c.irName);
  a.type = occl::collTypeFromName(a.coll);
  if (std::find(names.begin(), names.end(), a.coll) == names.end())
    return usageError(absl::StrFormat("emit %s: expected one of %s", a.coll, absl::StrJoin(names, ", ")));
  bool ranksGiven = false;
  for (size_t i = 1; i < args.size(); i += 2) {
    const std::string& flag = args[i];
    if (i + 1 >= args.size()) return usageError(absl::StrFormat("%s needs a value", flag));
    const std::string& value = args[i + 1];
    if (flag == "--algo") {
      a.algo = value;
    } else if (flag == "--name") {
      a.name = value;
    } else if (flag == "--ranks" || flag == "--channels" || flag == "--root") {
      std::optional<int> v = parseInt(value);
      if (!v) return usageError(absl::StrFormat("%s '%s': expected an integer", flag, value));
      if (flag == "--ranks") {
        a.ranks = *v;
        ranksGiven = true;
      } else if (flag == "--channels") {
        a.channels = *v;
        a.channelsGiven = true;
      } else {
        a.root = *v;
        a.rootGiven = true;
      }
    } else {
      return usageError(absl::StrFormat("unknown option '%s'", flag));
    }
  }
  if (!ranksGiven) return usageError("emit needs --ranks N");
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
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h" || args[0] == "help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (args.size() >= 2 && args[0] == "check") return check(std::vector<std::string>(args.begin() + 1, args.end()));
  if (args.size() >= 2 && args[0] == "emit") return emit(std::vector<std::string>(args.begin() + 1, args.end()));
  std::fputs(kUsage, stderr);
  return 2;
}
