#include "baseline.hpp"

#include <chrono>
#include <climits>
#include <fstream>
#include <iostream>

#include "check.hpp"
#include "memory.hpp"
#include "plan.hpp"
#include "report.hpp"

namespace occl::bench::baseline {
namespace {

// Options that occl-bench takes but a baseline cannot honour; "" when there is none.
std::string refused(const Options& o) {
  if (o.coll != Coll::AllReduce)
    return std::string("the collective: only allreduce is measured (got ") + collName(o.coll) + ")";
  if (o.dtypes != std::vector<int>{occlFloat32}) return "-d/--datatype: only float is measured";
  if (o.ops != std::vector<int>{occlSum}) return "-o/--op: only sum is measured";
  if (!o.algorithm.empty()) return "--algo: occl only";
  if (o.blocks != 0) return "--blocks: occl only";
  if (o.compareNccl) return "--compare: occl only";
  if (o.backend == occlBackendCuda) return "--backend cuda: the baselines run on the host";
  // MPI counts are ints; keep both baselines on the same range.
  if (o.maxBytes / sizeof(float) > static_cast<uint64_t>(INT_MAX)) return "-e/--maxbytes: at most 8G (2^31 floats)";
  return "";
}

// Both runs of a row read and write the same rank-local buffers, as occl-bench's do.
struct Buffers {
  HostBuffer send;
  HostBuffer recv;
};

// What occl-bench's RankRunner::measure times, call for call: the input is written once, the
// warm-up runs, a barrier lines the ranks up, then the clock covers the timed blocking AllReduces
// back to back (occl-bench waits for each callback before the next submission, so each of its
// iterations is also one complete collective). The result is this rank's time per iteration;
// the row reports the max over ranks (-a). -c more runs on fresh, poisoned buffers are then checked.
PlaceResult measure(const Options& o, Library& library, const SizePlan& plan, int rank, int nRanks, Buffers& buffers,
                    bool inPlace) {
  const CheckSpec spec{plan, occlSum, 0, rank, nRanks};
  buffers.send.reserve(plan.sendElems * plan.elemSize);
  buffers.recv.reserve(plan.recvElems * plan.elemSize);
  auto* recv = reinterpret_cast<float*>(buffers.recv.data());
  auto* send = inPlace ? recv : reinterpret_cast<float*>(buffers.send.data());
  const RunBuffers run{send, recv};
  PlaceResult place;
  const IterCounts counts = itersFor(o, plan.bytes);
  writeInput(spec, send);
  for (int i = 0; i < counts.warmup; ++i) library.allreduce(send, recv, plan.count);
  library.barrier();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < counts.timed; ++i) library.allreduce(send, recv, plan.count);
  const auto stop = std::chrono::steady_clock::now();
  place.timeUs = std::chrono::duration<double, std::micro>(stop - start).count() / counts.timed;
  place.wrong = 0;
  for (int c = 0; c < o.check; ++c) {
    prepareRun(spec, run);
    library.allreduce(send, recv, plan.count);
    place.wrong += countWrong(spec, recv);
  }
  place.ran = true;
  return place;
}

// The warm-up occl-bench runs before its first row (RankRunner::warmUp, nccl-tests' TimeTest):
// the size's untimed runs out of place (`settle`: at least --settle-iters of them), nothing timed
// or checked.
void warmUp(const Options& o, Library& library, uint64_t bytes, bool settle, int rank, int nRanks, Buffers& buffers) {
  const SizePlan plan = planFor(Coll::AllReduce, bytes, occlFloat32, nRanks);
  buffers.send.reserve(plan.sendElems * plan.elemSize);
  buffers.recv.reserve(plan.recvElems * plan.elemSize);
  auto* send = reinterpret_cast<float*>(buffers.send.data());
  auto* recv = reinterpret_cast<float*>(buffers.recv.data());
  writeInput(CheckSpec{plan, occlSum, 0, rank, nRanks}, send);
  const int iters = settle ? settleWarmUpIters(o, plan.bytes) : itersFor(o, plan.bytes).warmup;
  for (int i = 0; i < iters; ++i) library.allreduce(send, recv, plan.count);
}

// Turns this rank's numbers into the row every rank agrees on: the time -a asks for (the max by
// default), summed wrong counts.
void agree(const Options& o, Library& library, uint64_t bytes, int rank, int nRanks, PlaceResult& place) {
  place.timeUs = agreedTime(
      o.average, place.timeUs, rank, nRanks, [&](double v) { return library.max(v); },
      [&](double v) { return library.sum(v); });
  place.wrong = o.check ? static_cast<int64_t>(library.sum(static_cast<double>(place.wrong))) : -1;
  setBandwidth(place, bytes, busBwFactor(Coll::AllReduce, nRanks));
}

}  // namespace

std::string parse(const std::vector<std::string>& args, Options& options) {
  const ParsedArgs parsed = parseArgs(args);
  if (!parsed.ok()) return parsed.error;
  options = parsed.options;
  return options.help || options.version ? "" : refused(options);
}

std::string usage(const std::string& program, const std::string& launchHelp) {
  return "usage: " + program +
         " [allreduce] [flags]   (occl-bench's flags; float sum AllReduce only)\n" +
         sweepUsage() + launchHelp;
}

std::string sweepLine(const Options& o) {
  const bool factor = o.stepFactor > 1;
  return "# minBytes " + std::to_string(o.minBytes) + " maxBytes " + std::to_string(o.maxBytes) + " step: " +
         std::to_string(factor ? o.stepFactor : o.stepBytes) + (factor ? "(factor)" : "(bytes)") +
         " warmup iters: " + std::to_string(o.warmupIters) + " iters: " + std::to_string(o.iters) +
         " validation: " + std::to_string(o.check) + "\n" + iterationLines(o);
}

int runSweep(const Options& o, Library& library, int rank, int nRanks, std::ostream* out, const std::string& preamble) {
  Report report(out, o, nRanks);
  if (out != nullptr) *out << preamble << "#\n" << tableHeader() << std::flush;
  Buffers buffers;
  const std::vector<uint64_t> sizes = sizeSequence(o);
  if (!sizes.empty()) {
    warmUp(o, library, sizes.back(), false, rank, nRanks, buffers);
    warmUp(o, library, sizes.front(), true, rank, nRanks, buffers);
  }
  for (uint64_t bytes : sizes) {
    RowResult row;
    const SizePlan plan = planFor(Coll::AllReduce, bytes, occlFloat32, nRanks);
    row.bytes = plan.bytes;
    row.count = plan.count;
    row.dtype = occlFloat32;
    row.op = occlSum;
    row.outOfPlace = measure(o, library, plan, rank, nRanks, buffers, false);
    row.inPlace = measure(o, library, plan, rank, nRanks, buffers, true);
    agree(o, library, row.bytes, rank, nRanks, row.outOfPlace);
    agree(o, library, row.bytes, rank, nRanks, row.inPlace);
    report.row(row);
  }
  report.end();
  // --json: the same file occl-bench writes (bench/json.cpp), from the rank that prints.
  if (out != nullptr && !o.jsonPath.empty()) {
    std::ofstream file(o.jsonPath);
    writeJson(file, report);
    if (!file) {
      std::cerr << "--json: cannot write \"" << o.jsonPath << "\"\n";
      return kExitFailed;
    }
  }
  return report.wrongTotal() > 0 ? kExitFailed : kExitOk;
}

}  // namespace occl::bench::baseline
