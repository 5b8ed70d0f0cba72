// Orchestration: configuration, communicators (ranks as threads, or one rank per process under a
// launcher), one RankRunner per rank, the summary, JSON and the exit code.
#include "bench.hpp"

#include <algorithm>
#include <barrier>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <thread>

#include "bootstrap/launcher_env.hpp"
#include "compare_nccl.hpp"
#include "device/simt_crossings.hpp"
#include "ir_loader/msccl_ir.hpp"
#include "ir_loader/validate.hpp"
#include "placement.hpp"
#include "plan.hpp"
#include "runner.hpp"

namespace occl::bench {
namespace {

// --timeline: records a daemon block keeps, enough for every timed run of a row at the defaults
// and far more (a row's registrations x -n); rows older than that are read before they go.
constexpr int kBenchTimelineDepth = 4096;

// mpirun and torchrun start one process per rank and say so in the environment.
bool underLauncher(const Options& o) { return o.mpi || bootstrap::launcherSetsRanks(); }

std::chrono::milliseconds waitBound(const occlConfig_t& c) {
  // Beyond occl's own collective timeout, which should fire first and fail the collective with
  // occlTimeout; this bound only catches a completion that occl lost.
  if (c.collTimeoutMs <= 0) return std::chrono::hours(24 * 365);
  return std::chrono::milliseconds(c.collTimeoutMs + 30000);
}

BenchOutcome fail(std::ostream& err, int code, const std::string& message) {
  err << "occl-bench: " << message << "\n";
  BenchOutcome o;
  o.exitCode = code;
  return o;
}

// Checks that need no communicator and no device; "" when the options can run here.
std::string unsupported(const Options& o, bool launcher) {
  if (o.compareNccl)
    if (std::string e = ncclMissingFromBuild(); !e.empty()) return e;
  if (launcher && o.compareNccl)
    return "--compare nccl: ranks as threads only (-g N, one per GPU); under mpirun/torchrun/--mpi it does not run";
  if (launcher && o.localRanks > 1)
    return "-g/--ngpus: expected 1 under mpirun/torchrun/--mpi (one rank per process); got " +
           std::to_string(o.localRanks);
  return "";
}

std::string rootError(const Options& o, int nRanks) {
  if (!usesRoot(o.coll) || o.root < nRanks) return "";
  return "-r/--root: invalid value \"" + std::to_string(o.root) + "\"; expected a rank in 0.." +
         std::to_string(nRanks - 1);
}

std::string runRank(const Options& o, occlComm_t& comm, int rank, int nRanks, int device, Report& report,
                    ErrorSink& errors, std::chrono::milliseconds bound, std::barrier<>* localSync = nullptr) {
  RankRunner runner(o, comm, rank, nRanks, device, report, errors, bound,
                    o.sharedBuffers == 1 ? makeSharedBuffer : makeBuffer, localSync);
  std::string fatal;
  try {
    fatal = runner.run();
  } catch (const std::exception& e) {
    fatal = std::string("unexpected error: ") + e.what();
  }
  if (!fatal.empty()) {
    runner.abortComm();  // while the runner's buffers and completions are still alive
    comm = nullptr;
  }
  return fatal;
}

void closeComm(occlComm_t comm) {
  if (comm == nullptr) return;
  occlCommFinalize(comm);
  occlCommDestroy(comm);
}

// `fatal[i]` belongs to rank `firstRank + i`; `writer` says whether this process writes JSON;
// `ncclError`: why --compare nccl failed, if it did.
BenchOutcome summarize(const Options& o, const Report& report, const std::vector<std::string>& fatal, int firstRank,
                       bool writer, const std::string& ncclError, std::ostream& err) {
  BenchOutcome out;
  out.rows = report.rows();
  out.wrongTotal = report.wrongTotal();
  out.failedRows = report.failedRows();
  out.avgBusBw = report.avgBusBw();
  bool anyFatal = false;
  for (size_t i = 0; i < fatal.size(); ++i) {
    if (fatal[i].empty()) continue;
    anyFatal = true;
    err << "occl-bench: rank " << firstRank + static_cast<int>(i) << ": fatal: " << fatal[i] << "\n";
  }
  if (!ncclError.empty()) err << "occl-bench: " << ncclError << "\n";
  if (anyFatal || out.failedRows > 0 || out.wrongTotal > 0 || !ncclError.empty()) out.exitCode = kExitFailed;
  if (writer && !o.jsonPath.empty()) {
    std::ofstream file(o.jsonPath);
    writeJson(file, report);
    if (!file) {
      err << "occl-bench: --json: cannot write \"" << o.jsonPath << "\"\n";
      out.exitCode = kExitFailed;
    }
  }
  return out;
}

BenchOutcome runThreads(const Options& o, const occlConfig_t& config, const Placement& placement, std::ostream& out,
                        std::ostream& err) {
  const int n = o.localRanks;
  if (std::string e = rootError(o, n); !e.empty()) return fail(err, kExitUsage, e);
  const std::vector<int> devices = placement.devices(n);
  if (o.compareNccl)
    if (std::string e = ncclDeviceClash(devices, placement.deviceCount); !e.empty()) return fail(err, kExitUsage, e);
  const bool cuda = placement.backend == occlBackendCuda;
  std::vector<occlComm_t> comms(static_cast<size_t>(n), nullptr);
  if (occlResult_t r = occlCommInitAll(comms.data(), n, cuda ? devices.data() : nullptr, &config); r != occlSuccess)
    return fail(err, kExitFailed,
                std::string("occlCommInitAll: ") + occlGetErrorString(r) + ": " + occlGetLastError(nullptr));
  ErrorSink errors{err, {}};
  std::vector<std::unique_ptr<Report>> reports;
  for (int r = 0; r < n; ++r) reports.push_back(std::make_unique<Report>(r == 0 ? &out : nullptr, o, n));
  std::vector<std::string> fatal(static_cast<size_t>(n));
  std::barrier<> localSync(n);
  {
    std::vector<std::jthread> threads;
    for (int r = 0; r < n; ++r)
      threads.emplace_back([&, r] {
        const size_t i = static_cast<size_t>(r);
        fatal[i] = runRank(o, comms[i], r, n, devices[i], *reports[i], errors, waitBound(config), &localSync);
      });
  }
  for (occlComm_t c : comms) closeComm(c);
  // NCCL after occl's communicators are gone: no daemon kernel shares the GPUs with it.
  std::string ncclError;
  const bool ranAll = std::all_of(fatal.begin(), fatal.end(), [](const std::string& f) { return f.empty(); });
  if (o.compareNccl && ranAll) ncclError = compareWithNccl(o, devices, *reports[0]);
  return summarize(o, *reports[0], fatal, 0, true, ncclError, err);
}

BenchOutcome runProcess(const Options& o, const occlConfig_t& config, const Placement& placement, std::ostream& out,
                        std::ostream& err) {
  occlComm_t comm = nullptr;
  if (occlResult_t r = occlCommInitFromEnv(&comm, &config); r != occlSuccess)
    return fail(err, kExitFailed,
                std::string("occlCommInitFromEnv: ") + occlGetErrorString(r) + ": " + occlGetLastError(nullptr));
  int rank = 0, n = 1;
  occlCommUserRank(comm, &rank);
  occlCommCount(comm, &n);
  if (std::string e = rootError(o, n); !e.empty()) {
    closeComm(comm);
    return fail(err, kExitUsage, e);
  }
  Report report(rank == 0 ? &out : nullptr, o, n);
  ErrorSink errors{err, {}};
  std::vector<std::string> fatal{runRank(o, comm, rank, n, placement.device(rank), report, errors, waitBound(config))};
  closeComm(comm);
  return summarize(o, report, fatal, rank, rank == 0, "", err);
}

}  // namespace

// --algo FILE: the collective comes from the file unless the command line names one (then they
// must agree), the ranks must be as many as it is written for, and the daemon needs a block for
// every threadblock of a rank.
std::string adoptProgram(Options& o, occlConfig_t& config, bool launcher) {
  if (o.algorithm.empty() || o.algorithm == "ring") return "";
  ir::LoadResult loaded = ir::loadMscclIrFile(o.algorithm);
  if (!loaded.ok()) return "--algo: " + ir::formatErrors(loaded.errors, o.algorithm);
  const ir::Program& p = *loaded.program;
  const std::optional<Coll> fileColl = collFromName(ir::collName(p.coll));
  if (!fileColl) return "--algo " + o.algorithm + ": occl-bench cannot measure a " + ir::collName(p.coll) + " program";
  if (o.collGiven && *fileColl != o.coll)
    return "--algo " + o.algorithm + " is a program for " + ir::collName(p.coll) + "; the collective asked for is " +
           collName(o.coll);
  o.coll = *fileColl;
  if (!launcher && o.localRanks != p.nRanks)
    return "--algo " + o.algorithm + " is written for " + std::to_string(p.nRanks) + " ranks: run it with -g " +
           std::to_string(p.nRanks) + " (got -g " + std::to_string(o.localRanks) + ")";
  for (const ir::RankProgram& r : p.ranks) config.daemonBlocks = std::max<int>(config.daemonBlocks, static_cast<int>(r.blocks.size()));
  return "";
}

BenchOutcome runBench(const Options& requested, std::ostream& out, std::ostream& err) {
  Options o = requested;
  const bool launcher = underLauncher(o);
  if (std::string e = unsupported(o, launcher); !e.empty()) return fail(err, kExitUsage, e);
  const PlacementResult placed = placeRanks(o, launcher);
  if (!placed.error.empty()) return fail(err, placed.exitCode, placed.error);
  o.backend = placed.placement.backend;  // what the report prints: auto is resolved
  if (o.sharedBuffers == 1 && o.backend != occlBackendHost)
    return fail(err, kExitUsage, "--shared-buffers 1: occlMemAlloc memory is host memory; expected --backend host");
  if (o.submit == SubmitMode::Stream && o.backend != occlBackendCuda)
    return fail(err, kExitUsage, "--submit stream: a CUDA stream orders the submission; expected --backend cuda");
  // Auto: where it changes what runs, ranks as processes on the host backend (threads read each
  // other's buffers whatever memory they are).
  if (o.sharedBuffers < 0) o.sharedBuffers = o.backend == occlBackendHost && launcher ? 1 : 0;
  if (!launcher && !o.jsonPath.empty() && !std::ofstream(o.jsonPath, std::ios::app))
    return fail(err, kExitUsage, "--json: invalid value \"" + o.jsonPath + "\"; expected a writable file path");
  occlConfig_t config;
  if (occlResult_t r = occlConfigInit(&config); r != occlSuccess)
    return fail(err, kExitFailed,
                std::string("occlConfigInit (OCCL_* environment): ") + occlGetErrorString(r) + ": " +
                    occlGetLastError(nullptr));
  config.backend = placed.placement.backend;
  config.daemonBlocks = std::max(config.daemonBlocks, o.blocks);  // --blocks N needs N daemon blocks
  if (o.timeline) config.timelineDepth = kBenchTimelineDepth;
  if (o.timeoutS > 0) config.collTimeoutMs = o.timeoutS * 1000;
  // The simt backend counts its bus crossings (the footer's "host crossings" lines): from before
  // the first launch, so every lane counts.
  exec::simt::countCrossings(config.backend == occlBackendSimt);
  if (std::string e = adoptProgram(o, config, launcher); !e.empty()) return fail(err, kExitUsage, e);
  return launcher ? runProcess(o, config, placed.placement, out, err)
                  : runThreads(o, config, placed.placement, out, err);
}

int benchMain(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  const std::string program = args.empty() ? "occl-bench" : std::filesystem::path(args[0]).filename().string();
  const ParsedArgs parsed = parseArgs(args);
  if (!parsed.ok()) {
    err << program << ": " << parsed.error << "\n";
    return kExitUsage;
  }
  if (parsed.options.help) {
    out << usage(program);
    return kExitOk;
  }
  if (parsed.options.version) {
    out << cli::versionLine(program) << "\n";
    return kExitOk;
  }
  try {
    return runBench(parsed.options, out, err).exitCode;
  } catch (const std::exception& e) {
    err << program << ": " << e.what() << "\n";
    return kExitFailed;
  }
}

}  // namespace occl::bench
