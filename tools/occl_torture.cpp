// occl-torture: runs the deadlock torture workload (src/torture) from the command line. N
// ranks as threads (or one rank per process under mpirun or torchrun, on one host or several)
// submit K AllReduces per iteration, each rank in its own order (or all in one order), and the
// tool reports completions, preemptions, context loads/saves, throughput, an estimate of the
// cost of one context switch, and the bit-exact result check. With processes, rank 0 prints the
// report, its counters summed over the ranks by one more occl AllReduce.
//
// Exit status: 0 all results right, 1 wrong data or a failed collective, 2 a hang (timeout),
// 3 bad arguments or a failed init.
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "bootstrap/launcher_env.hpp"
#include "occl_torture.hpp"

namespace {

using occl::tools::TortureOptions;
using occl::torture::Order;

const char* kUsage =
    "usage: occl-torture [options]\n"
    "  --ranks N            ranks (threads of this process), default 8\n"
    "  --mpi                one rank per process from the launcher's environment (mpirun:\n"
    "                       OMPI_COMM_WORLD_*, torchrun: RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT;\n"
    "                       implied when OMPI_COMM_WORLD_SIZE or WORLD_SIZE is set)\n"
    "  --colls K            AllReduces per iteration, default 8\n"
    "  --min-bytes B        smallest collective (K/M/G suffix ok), default 256\n"
    "  --max-bytes B        largest; sizes grow x4 from min-bytes and wrap, default 1M\n"
    "  --iters I            iterations, default 20\n"
    "  --blocks D           daemon blocks per rank, default 1\n"
    "  --order consistent|shuffled   one order on every rank, or one per rank (default)\n"
    "  --policy agreed|fifo|priority task-queue order policy, default agreed (the library's)\n"
    "  --spin stickiness|fixed       spin-threshold policy, default stickiness\n"
    "  --force-preempt      preempt at every wait\n"
    "  --no-preempt         never preempt (a disordered run then hangs: see --timeout-ms)\n"
    "  --timeout-ms T       bound of one iteration, default 20000\n"
    "  --no-switch-cost     skip the second run that estimates the cost of a context switch\n"
    "  --seed S             seed of the per-rank orders, default 1\n"
    "  --lag-us L           rank 0 submits each iteration L us late (the lagging GPU of OCCL Fig. 9)\n"
    "  --gates              submit gated (occlSubmitGated) before the inputs exist; another thread\n"
    "                       writes each input and opens its gate, in an order of its own per rank\n";

std::optional<size_t> parseBytes(std::string_view v) {
  size_t n = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || end == v.data()) return std::nullopt;
  std::string_view suffix(end, static_cast<size_t>(v.data() + v.size() - end));
  if (suffix.empty()) return n;
  if (suffix == "K" || suffix == "k") return n << 10;
  if (suffix == "M" || suffix == "m") return n << 20;
  if (suffix == "G" || suffix == "g") return n << 30;
  return std::nullopt;
}

std::optional<int64_t> parseInt(std::string_view v, int64_t lo, int64_t hi) {
  int64_t n = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || end != v.data() + v.size() || n < lo || n > hi) return std::nullopt;
  return n;
}

// Applies one "--flag value" pair; returns what was expected when the value is bad.
std::string applyValue(std::string_view flag, std::string_view v, TortureOptions& o) {
  auto intoInt = [&](int& field, int64_t lo, int64_t hi) -> std::string {
    auto n = parseInt(v, lo, hi);
    if (!n) return "an integer in " + std::to_string(lo) + ".." + std::to_string(hi);
    field = static_cast<int>(*n);
    return "";
  };
  auto intoBytes = [&](size_t& field) -> std::string {
    auto n = parseBytes(v);
    if (!n || *n < 4) return "a byte count >= 4 (K/M/G suffix ok)";
    field = *n;
    return "";
  };
  auto choice = [&](int& field, std::initializer_list<std::pair<const char*, int>> names) -> std::string {
    std::string expected;
    for (const auto& [name, value] : names) {
      if (v == name) {
        field = value;
        return "";
      }
      expected += expected.empty() ? name : std::string(" or ") + name;
    }
    return expected;
  };
  if (flag == "--ranks") return intoInt(o.ranks, 1, 64);
  if (flag == "--colls") return intoInt(o.colls, 1, 1000);
  if (flag == "--iters") return intoInt(o.iters, 1, 1000000);
  if (flag == "--blocks") return intoInt(o.blocks, 1, 64);
  if (flag == "--lag-us") return intoInt(o.lagUs, 0, 10000000);
  if (flag == "--min-bytes") return intoBytes(o.minBytes);
  if (flag == "--max-bytes") return intoBytes(o.maxBytes);
  if (flag == "--policy")
    return choice(o.policy, {{"agreed", occlOrderAgreed}, {"fifo", occlOrderFifo}, {"priority", occlOrderPriority}});
  if (flag == "--spin") return choice(o.spin, {{"stickiness", occlSpinPolicyStickiness}, {"fixed", occlSpinPolicyFixed}});
  if (flag == "--order") {
    int shuffled = 1;
    std::string e = choice(shuffled, {{"consistent", 0}, {"shuffled", 1}});
    o.order = shuffled ? Order::Shuffled : Order::Consistent;
    return e;
  }
  if (flag == "--timeout-ms") {
    auto n = parseInt(v, 1, int64_t{1} << 40);
    if (!n) return "a positive number of milliseconds";
    o.timeoutMs = *n;
    return "";
  }
  if (flag == "--seed") {
    auto n = parseInt(v, 0, INT64_MAX);
    if (!n) return "a non-negative integer";
    o.seed = static_cast<uint64_t>(*n);
    return "";
  }
  return "?";
}

bool parseArgs(int argc, char** argv, TortureOptions& o) {
  bool ranksGiven = false;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    const char* flag = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    if (a == "--mpi") o.processes = true;
    else if (a == "--force-preempt") o.forcePreempt = true;
    else if (a == "--no-preempt") o.noPreempt = true;
    else if (a == "--no-switch-cost") o.switchCost = false;
    else if (a == "--gates") o.gates = true;
    else {
      std::string_view value;
      if (auto eq = a.find('='); eq != std::string_view::npos) {
        value = a.substr(eq + 1);
        a = a.substr(0, eq);
      } else if (i + 1 < argc) {
        value = argv[++i];
      }
      ranksGiven = ranksGiven || a == "--ranks";
      std::string expected = applyValue(a, value, o);
      if (expected == "?") {
        std::fprintf(stderr, "occl-torture: unknown option %s\n%s", flag, kUsage);
        return false;
      }
      if (!expected.empty()) {
        std::fprintf(stderr, "occl-torture: %.*s = \"%.*s\": expected %s\n", static_cast<int>(a.size()), a.data(),
                     static_cast<int>(value.size()), value.data(), expected.c_str());
        return false;
      }
    }
  }
  if (occl::bootstrap::launcherSetsRanks()) o.processes = true;
  if (o.processes && ranksGiven) {
    std::fputs("occl-torture: --ranks is for ranks as threads; with one rank per process the launcher sets the "
               "count\n", stderr);
    return false;
  }
  if (o.forcePreempt && o.noPreempt) {
    std::fputs("occl-torture: --force-preempt and --no-preempt exclude each other\n", stderr);
    return false;
  }
  if (o.minBytes > o.maxBytes) {
    std::fputs("occl-torture: --min-bytes must not exceed --max-bytes\n", stderr);
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  TortureOptions o;
  if (!parseArgs(argc, argv, o)) return 3;
  return occl::tools::runTorture(o);
}
