// occl-torture: runs the deadlock torture workload (src/torture) from the command line. N
// ranks as threads (or one rank per process under mpirun or torchrun, on one host or several)
// submit K AllReduces per iteration, each rank in its own order (or all in one order), and the
// tool reports completions, preemptions, context loads/saves, throughput, an estimate of the
// cost of one context switch, and the bit-exact result check. With processes, rank 0 prints the
// report, its counters summed over the ranks by one more occl AllReduce.
//
// Exit status: 0 all results right, 1 wrong data or a failed collective, 2 a hang (timeout),
// 3 bad arguments or a failed init.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bootstrap/launcher_env.hpp"
#include "cli/flags.hpp"
#include "occl_torture.hpp"

namespace {

using occl::tools::TortureOptions;
using occl::torture::Order;

constexpr const char* kSynopsis = "usage: occl-torture [flags]   (occl-torture --help lists them)\n";

// Applies an integer in lo..hi to `field`; returns "" or what was expected.
template <class T>
std::function<std::string(std::string_view)> integer(T& field, int64_t lo, int64_t hi, const char* expected) {
  return [&field, lo, hi, expected](std::string_view v) -> std::string {
    auto n = occl::cli::parseInt(v);
    if (!n || *n < lo || *n > hi) return expected;
    field = static_cast<T>(*n);
    return "";
  };
}

std::function<std::string(std::string_view)> choice(int& field, std::vector<std::pair<std::string, int>> names) {
  return [&field, names](std::string_view v) -> std::string {
    std::string expected;
    for (const auto& [name, value] : names) {
      if (v == name) {
        field = value;
        return "";
      }
      expected += expected.empty() ? name : " or " + name;
    }
    return expected;
  };
}

std::function<std::string(std::string_view)> set(bool& field, bool value) {
  return [&field, value](std::string_view) {
    field = value;
    return std::string();
  };
}

std::vector<occl::cli::Flag> flags(TortureOptions& o, bool& ranksGiven, int& order) {
  return {
      {'\0', "ranks", "N", "ranks (threads of this process), default 8",
       [&o, &ranksGiven, f = integer(o.ranks, 1, 64, "an integer in 1..64")](std::string_view v) {
         ranksGiven = true;
         return f(v);
       }},
      {'\0', "mpi", "",
       "one rank per process from the launcher's environment (mpirun:\nOMPI_COMM_WORLD_*, torchrun: RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT;\nimplied when OMPI_COMM_WORLD_SIZE or WORLD_SIZE is set)",
       set(o.processes, true)},
      {'\0', "colls", "K", "AllReduces per iteration, default 8", integer(o.colls, 1, 1000, "an integer in 1..1000")},
      {'\0', "min-bytes", "B", "smallest collective (K/M/G suffix ok), default 256", occl::cli::bytesAtLeast(o.minBytes, 4)},
      {'\0', "max-bytes", "B", "largest; sizes grow x4 from min-bytes and wrap, default 1M", occl::cli::bytesAtLeast(o.maxBytes, 4)},
      {'\0', "iters", "I", "iterations, default 20", integer(o.iters, 1, 1000000, "an integer in 1..1000000")},
      {'\0', "blocks", "D", "daemon blocks per rank, default 1", integer(o.blocks, 1, 64, "an integer in 1..64")},
      {'\0', "order", "consistent|shuffled", "one order on every rank, or one per rank (default)",
       choice(order, {{"consistent", 0}, {"shuffled", 1}})},
      {'\0', "policy", "agreed|fifo|priority", "task-queue order policy, default agreed (the library's)",
       choice(o.policy, {{"agreed", occlOrderAgreed}, {"fifo", occlOrderFifo}, {"priority", occlOrderPriority}})},
      {'\0', "spin", "stickiness|fixed", "spin-threshold policy, default stickiness",
       choice(o.spin, {{"stickiness", occlSpinPolicyStickiness}, {"fixed", occlSpinPolicyFixed}})},
      {'\0', "force-preempt", "", "preempt at every wait", set(o.forcePreempt, true)},
      {'\0', "no-preempt", "", "never preempt (a disordered run then hangs: see --timeout-ms)", set(o.noPreempt, true)},
      {'\0', "timeout-ms", "T", "bound of one iteration, default 20000",
       integer(o.timeoutMs, 1, int64_t{1} << 40, "a positive number of milliseconds")},
      {'\0', "no-switch-cost", "", "skip the second run that estimates the cost of a context switch",
       set(o.switchCost, false)},
      {'\0', "seed", "S", "seed of the per-rank orders, default 1", integer(o.seed, 0, INT64_MAX, "a non-negative integer")},
      {'\0', "lag-us", "L", "rank 0 submits each iteration L us late (the lagging GPU of OCCL Fig. 9)",
       integer(o.lagUs, 0, 10000000, "an integer in 0..10000000")},
      {'\0', "gates", "",
       "submit gated (occlSubmitGated) before the inputs exist; another thread\nwrites each input and opens its gate, in an order of its own per rank",
       set(o.gates, true)},
  };
}

// Exits: 0 after --help or --version, 3 after a usage error; otherwise returns with `o` filled.
std::optional<int> parseArgs(int argc, char** argv, TortureOptions& o) {
  bool ranksGiven = false;
  int order = o.order == Order::Shuffled ? 1 : 0;
  const std::vector<occl::cli::Flag> table = flags(o, ranksGiven, order);
  const occl::cli::Parsed parsed = occl::cli::parse(std::vector<std::string>(argv + 1, argv + argc), table);
  auto usageError = [](const std::string& message) {
    std::fprintf(stderr, "occl-torture: %s\n%s", message.c_str(), kSynopsis);
    return 3;
  };
  if (parsed.help) {
    std::printf("usage: occl-torture [flags]\n%s", occl::cli::usage(table).c_str());
    return 0;
  }
  if (parsed.version) {
    std::printf("%s\n", occl::cli::versionLine("occl-torture").c_str());
    return 0;
  }
  if (!parsed.ok()) return usageError(parsed.error);
  if (!parsed.positionals.empty()) return usageError("unexpected argument \"" + parsed.positionals[0] + "\": occl-torture takes flags only");
  o.order = order != 0 ? Order::Shuffled : Order::Consistent;
  if (occl::bootstrap::launcherSetsRanks()) o.processes = true;
  if (o.processes && ranksGiven)
    return usageError("--ranks is for ranks as threads; with one rank per process the launcher sets the count");
  if (o.forcePreempt && o.noPreempt) return usageError("--force-preempt and --no-preempt exclude each other");
  if (o.minBytes > o.maxBytes) return usageError("--min-bytes must not exceed --max-bytes");
  return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  TortureOptions o;
  if (std::optional<int> exitCode = parseArgs(argc, argv, o)) return *exitCode;
  return occl::tools::runTorture(o);
}
