#include "runner.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>

namespace occl::bench {
namespace {

// Per rank in the introduction: pid, CUDA device (-1: host), its peers per transport (packed by
// packTransports), then 32 bytes of host name.
constexpr size_t kInfoWords = 7;
constexpr size_t kTransportWord = 2;
constexpr size_t kHostWord = 3;

// How many of this rank's peers (itself excluded) each transport reaches, 16 bits per kind.
int64_t packTransports(occlComm_t comm, int rank, int nRanks) {
  int64_t packed = 0;
  for (int p = 0; p < nRanks; ++p) {
    const char* t = nullptr;
    if (p == rank || occlCommPeerTransport(comm, p, &t) != occlSuccess) continue;
    const std::string name = t;
    const int kind = name.find("net") != std::string::npos   ? 2
                     : name.find("ipc") != std::string::npos ? 3
                     : name.find("shm") != std::string::npos ? 1
                                                             : 0;
    packed += int64_t{1} << (16 * kind);
  }
  return packed;
}

std::string rowLabel(const Options& o, const RowResult& r) {
  return std::string(collName(o.coll)) + " " + std::to_string(r.bytes) + " B " + dtypeName(r.dtype) + " " +
         (r.op < 0 ? "none" : opName(r.op)) + ": ";
}

// The row's message on rank 0: its own error if it has one, else a pointer to the others'.
std::string describeFailure(const std::string& local, int64_t failedRanks) {
  if (!local.empty()) return failedRanks > 1 ? local + " (on " + std::to_string(failedRanks) + " ranks)" : local;
  return "failed on " + std::to_string(failedRanks) + " other rank(s); their messages are on stderr";
}

void finish(PlaceResult& place, double timeUs, int64_t wrong, uint64_t bytes, double factor, bool check) {
  if (!place.ran) return;
  place.timeUs = timeUs;
  setBandwidth(place, bytes, factor);
  place.wrong = check ? wrong : -1;
}

}  // namespace

void ErrorSink::line(int rank, const std::string& message) {
  std::lock_guard<std::mutex> lock(mu);
  err << "occl-bench: rank " << rank << ": " << message << "\n" << std::flush;
}

RankRunner::RankRunner(const Options& options, occlComm_t comm, int rank, int nRanks, int device, Report& report,
                       ErrorSink& errors, std::chrono::milliseconds bound, BufferMaker make,
                       std::barrier<>* localSync)
    : options_(options),
      comm_(comm),
      rank_(rank),
      nRanks_(nRanks),
      device_(device),
      localSync_(localSync),
      report_(report),
      errors_(errors),
      bound_(bound),
      side_(comm, bound, make(device)),
      send_(make(device)),
      recv_(make(device)) {}

void RankRunner::abortComm() {
  side_.detach();
  occlCommAbort(comm_);
  comm_ = nullptr;
}

std::string RankRunner::run() {
  if (std::string e = side_.open(); !e.empty()) return e;
  if (std::string e = introduce(); !e.empty()) return e;
  const std::vector<uint64_t> sizes = sizeSequence(options_);
  // Collectives without an operator run once per size, printed as "none".
  const std::vector<int> ops = isReducing(options_.coll) ? options_.ops : std::vector<int>{-1};
  for (int dtype : options_.dtypes) {
    for (int op : ops) {
      if (!sizes.empty()) {
        if (std::string fatal = warmUp(dtype, op, sizes.back(), sizes.size() - 1, false); !fatal.empty()) return fatal;
        if (std::string fatal = warmUp(dtype, op, sizes.front(), 0, true); !fatal.empty()) return fatal;
      }
      for (size_t i = 0; i < sizes.size(); ++i) {
        RowResult row;
        if (std::string fatal = runRow(dtype, op, sizes[i], i, row); !fatal.empty()) return fatal;
        report_.row(row);
      }
    }
  }
  report_.end();
  return "";
}

std::string RankRunner::introduce() {
  std::vector<int64_t> words(static_cast<size_t>(nRanks_) * kInfoWords, 0);
  int64_t* mine = &words[static_cast<size_t>(rank_) * kInfoWords];
  mine[0] = static_cast<int64_t>(getpid());
  mine[1] = device_;
  mine[kTransportWord] = packTransports(comm_, rank_, nRanks_);
  char host[(kInfoWords - kHostWord) * sizeof(int64_t)] = {};
  gethostname(host, sizeof host - 1);
  std::memcpy(&mine[kHostWord], host, sizeof host);
  if (RunStatus s = side_.sumVector(words); !s.ok()) return "exchanging rank information: " + s.error;
  std::vector<RankInfo> ranks(static_cast<size_t>(nRanks_));
  for (size_t r = 0; r < ranks.size(); ++r) {
    const int64_t* w = &words[r * kInfoWords];
    ranks[r].pid = w[0];
    ranks[r].device = static_cast<int>(w[1]);
    for (int kind = 0; kind < 4; ++kind) ranks[r].peersBy[kind] = static_cast<int>((w[kTransportWord] >> (16 * kind)) & 0xffff);
    std::memcpy(host, &w[kHostWord], sizeof host);
    host[sizeof host - 1] = '\0';
    ranks[r].host = host;
  }
  report_.begin(ranks);
  return "";
}

RankRunner::Row RankRunner::makeRow(int dtype, int op, uint64_t bytes, uint64_t sizeIndex) const {
  Row row;
  row.plan = planFor(options_.coll, bytes, dtype, nRanks_);
  const int regOp = op < 0 ? occlSum : op;
  row.spec = CheckSpec{row.plan, regOp, options_.root, rank_, nRanks_};
  row.regs = registrationsFor(row.plan, options_, RowKey{dtype, regOp, sizeIndex}, rank_, nRanks_);
  return row;
}

// nccl-tests' warm-up before a sweep: the row's untimed runs at one size, out of place, under the
// collIds that size's row registers later (deregistered in between). It wakes what a run needs
// (buffers at their largest, the ranks' threads, the scheduler's view of them: here the first
// ~100 ms of a run could place three ranks on one core: --settle-iters lengthens the one at the
// smallest size) before the first timed row. A size whose
// registration or runs fail is left to its row, which reports why; only a lost callback or a
// broken side channel stops the sweep.
std::string RankRunner::warmUp(int dtype, int op, uint64_t bytes, uint64_t sizeIndex, bool settle) {
  const Row row = makeRow(dtype, op, bytes, sizeIndex);
  const int iters = settle ? settleWarmUpIters(options_, row.plan.bytes) : itersFor(options_, row.plan.bytes).warmup;
  if (iters == 0) return "";
  const std::string regError = registerRow(row);
  SideChannel::Maxes maxes{};
  SideChannel::Sums sums{regError.empty() ? 0 : 1, 0, 0, 0};
  if (RunStatus s = side_.combine(maxes, sums); !s.ok()) return "result aggregation: " + s.error;
  if (sums[0] > 0) {
    if (regError.empty()) deregisterRow(row);
    return "";
  }
  const Layout layout = layoutFor(row.plan, false);
  const RunBuffers buffers = layout.device();
  writeInputs(row, layout);
  for (int i = 0; i < iters; ++i) {
    const RunStatus s = runOnce(row, buffers);
    if (s.lost) return s.error;
    if (!s.ok()) break;
  }
  deregisterRow(row);
  return "";
}

std::string RankRunner::runRow(int dtype, int op, uint64_t bytes, uint64_t sizeIndex, RowResult& out) {
  const Row row = makeRow(dtype, op, bytes, sizeIndex);
  out.bytes = row.plan.bytes;
  out.count = row.plan.count;
  out.dtype = dtype;
  out.op = op;
  out.root = usesRoot(options_.coll) ? options_.root : -1;

  // A row runs only where every rank registered it: a rank submitting alone would wait for
  // peers that never come. Slot 1 tells the others whether rank 0 can name the failure itself.
  const std::string regError = registerRow(row);
  SideChannel::Maxes maxes{};
  SideChannel::Sums sums{regError.empty() ? 0 : 1, rank_ == 0 && !regError.empty() ? 1 : 0, 0, 0};
  if (RunStatus s = side_.combine(maxes, sums); !s.ok()) return "result aggregation: " + s.error;
  if (sums[0] > 0) {
    if (regError.empty()) deregisterRow(row);
    out.error = describeFailure(regError, sums[0]);
    if (rank_ != 0 && !regError.empty() && sums[1] == 0) errors_.line(rank_, rowLabel(options_, out) + regError);
    return "";
  }

  std::string runError;
  bool fatal = false;
  out.outOfPlace = measure(row, false, runError, fatal);
  if (!fatal && supportsInPlace(options_.coll)) out.inPlace = measure(row, true, runError, fatal);
  if (fatal) return runError;
  deregisterRow(row);

  maxes = {out.outOfPlace.timeUs, out.inPlace.timeUs, 0, 0};
  sums = {out.outOfPlace.wrong, out.inPlace.wrong, runError.empty() ? 0 : 1, rank_ == 0 && !runError.empty() ? 1 : 0};
  if (RunStatus s = side_.combine(maxes, sums); !s.ok()) return "result aggregation: " + s.error;
  if (sums[2] > 0) {
    out.error = describeFailure(runError, sums[2]);
    if (rank_ != 0 && !runError.empty() && sums[3] == 0) errors_.line(rank_, rowLabel(options_, out) + runError);
    return "";
  }
  std::array<double, 2> times{maxes[0], maxes[1]};
  if (options_.average != 3) {
    if (std::string e = agreeOnTimes(out, times); !e.empty()) return e;
  }
  const double factor = busBwFactor(options_.coll, nRanks_);
  finish(out.outOfPlace, times[0], sums[0], out.bytes, factor, options_.check > 0);
  finish(out.inPlace, times[1], sums[1], out.bytes, factor, options_.check > 0);
  return "";
}

// -a 0, 1 or 2: rank 0's, the mean or the least of the ranks' times (one more round of the side
// channel; the most, the default, came with the row's other numbers). Sums are integers: the
// times go in picoseconds.
std::string RankRunner::agreeOnTimes(const RowResult& out, std::array<double, 2>& times) {
  const double mine[2] = {out.outOfPlace.timeUs, out.inPlace.timeUs};
  auto ps = [](double us) { return static_cast<int64_t>(std::llround(us * 1e6)); };
  SideChannel::Maxes maxes{-mine[0], -mine[1], 0, 0};
  SideChannel::Sums sums{ps(mine[0]), ps(mine[1]), rank_ == 0 ? ps(mine[0]) : 0, rank_ == 0 ? ps(mine[1]) : 0};
  if (RunStatus s = side_.combine(maxes, sums); !s.ok()) return "result aggregation: " + s.error;
  for (size_t i = 0; i < 2; ++i) {
    if (options_.average == 2) times[i] = -maxes[i];
    else if (options_.average == 1) times[i] = static_cast<double>(sums[i]) / 1e6 / nRanks_;
    else times[i] = static_cast<double>(sums[2 + i]) / 1e6;
  }
  return "";
}

std::string RankRunner::registerRow(const Row& row) {
  for (size_t i = 0; i < row.regs.size(); ++i) {
    const Registration& reg = row.regs[i];
    if (occlResult_t r = occlCollRegister(comm_, reg.collId, &reg.desc); r != occlSuccess) {
      std::string message = std::string("occlCollRegister: ") + occlGetErrorString(r) + ": " + occlGetLastError(comm_);
      for (size_t k = 0; k < i; ++k) occlCollDeregister(comm_, row.regs[k].collId);
      return message;
    }
  }
  return "";
}

void RankRunner::deregisterRow(const Row& row) {
  // Every submission has completed by now, so deregistration cannot fail on in-flight work.
  for (const Registration& reg : row.regs) occlCollDeregister(comm_, reg.collId);
}

RankRunner::Layout RankRunner::layoutFor(const SizePlan& plan, bool inPlace) {
  const size_t es = plan.elemSize;
  send_->reserve(plan.sendElems * es);
  recv_->reserve(std::max(plan.sendElems, plan.recvElems) * es);  // large enough to run in place
  if (!inPlace) return {send_.get(), 0, recv_.get(), 0};
  const InPlaceOffsets off = inPlaceOffsets(plan, rank_);
  return {recv_.get(), off.send * es, recv_.get(), off.recv * es};
}

void RankRunner::writeInputs(const Row& row, const Layout& at) {
  writeInput(row.spec, at.host().send);
  at.send->upload(at.sendOffset, row.plan.sendElems * row.plan.elemSize);
}

// In place the two windows overlap in one host copy, where prepareRun writes the input over the
// poison; uploading both windows from it puts that final state on the device.
void RankRunner::prepareCheck(const Row& row, const Layout& at) {
  prepareRun(row.spec, at.host());
  at.recv->upload(at.recvOffset, row.plan.recvElems * row.plan.elemSize);
  at.send->upload(at.sendOffset, row.plan.sendElems * row.plan.elemSize);
}

int64_t RankRunner::checkResults(const Row& row, const Layout& at) {
  at.recv->download(at.recvOffset, row.plan.recvElems * row.plan.elemSize);
  return countWrong(row.spec, at.host().recv);
}

RunStatus RankRunner::runOnce(const Row& row, const RunBuffers& buffers) {
  Submission parts[2];
  size_t n = 0;
  for (const Registration& reg : row.regs)
    parts[n++] = {reg.collId, reg.usesSend ? buffers.send : nullptr, reg.usesRecv ? buffers.recv : nullptr, reg.count};
  // Made at the first run, inside run()'s handling of errors (it throws a CUDA failure).
  if (options_.submit == SubmitMode::Stream && stream_ == nullptr) stream_ = makeRunStream(device_);
  return submitAndWait(comm_, std::span<const Submission>(parts, n), done_, bound_,
                       SubmitPath{options_.submit, stream_.get()});
}

RunStatus RankRunner::barrier() {
  SideChannel::Maxes maxes{};
  SideChannel::Sums sums{};
  return side_.combine(maxes, sums);
}

// Warm-up, a barrier so that all ranks start the clock together, the timed runs (each waits
// for its callbacks: the time is submit-to-callback latency), then -c checked runs on fresh
// inputs. After an error the collectives are skipped but the barrier is still entered, so the
// ranks stay in step; `fatal` means this rank cannot continue (a callback is lost, or the side
// channel failed).
// Crossings of `runs` runs of `submissions` submissions on each rank of this process, per
// submission and rank; one daemon block also read each SQE's line once (block 0: a kernel
// daemon of several blocks fans out, daemon/daemon.hpp).
PlaceResult::Crossings RankRunner::perCollective(const exec::simt::Crossings& before,
                                                 const exec::simt::Crossings& after, int runs,
                                                 size_t submissions) const {
  const double n = static_cast<double>(runs) * static_cast<double>(submissions) * options_.localRanks;
  const auto found = static_cast<uint64_t>(n);
  const uint64_t polls = after.sqPolls - before.sqPolls;
  PlaceResult::Crossings c;
  c.reads = static_cast<double>(after.reads - before.reads + found) / n;
  c.writes = static_cast<double>(after.writes - before.writes) / n;
  c.waitLooks = static_cast<double>(after.waitLooks - before.waitLooks) / n;
  c.idlePolls = polls > found ? polls - found : 0;
  return c;
}

// --timeline: each registration's newest `timed` submissions, as the part that completed each
// recorded them (the check run comes later), from when its block took the SQE.
std::optional<PlaceResult::Phases> RankRunner::phases(const Row& row, int timed) const {
  int n = 0;
  if (occlCommGetTimeline(comm_, nullptr, 0, &n) != occlSuccess || n == 0) return std::nullopt;
  std::vector<occlTimelineEntry_t> all(static_cast<size_t>(n));
  if (occlCommGetTimeline(comm_, all.data(), n, &n) != occlSuccess) return std::nullopt;
  all.resize(static_cast<size_t>(n));
  std::vector<double> started, first, last, done;
  auto after = [](uint64_t t, uint64_t from) { return (static_cast<double>(t) - static_cast<double>(from)) / 1e3; };
  for (const Registration& reg : row.regs) {
    std::vector<const occlTimelineEntry_t*> mine;
    for (const occlTimelineEntry_t& e : all)
      if (e.collId == reg.collId && e.completed != 0) mine.push_back(&e);
    std::sort(mine.begin(), mine.end(), [](auto* a, auto* b) { return a->seq < b->seq; });
    const size_t from = mine.size() > static_cast<size_t>(timed) ? mine.size() - static_cast<size_t>(timed) : 0;
    for (size_t i = from; i < mine.size(); ++i) {
      const occlTimelineEntry_t& e = *mine[i];
      started.push_back(after(e.startedNs, e.takenNs));
      if (e.firstDataNs != 0) {
        first.push_back(after(e.firstDataNs, e.takenNs));
        last.push_back(after(e.lastDataNs, e.takenNs));
      }
      done.push_back(after(e.doneNs, e.takenNs));
    }
  }
  if (done.empty()) return std::nullopt;
  auto median = [](std::vector<double>& v) {
    if (v.empty()) return 0.0;
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
    return v[v.size() / 2];
  };
  return PlaceResult::Phases{median(started), median(first), median(last), median(done), done.size()};
}

PlaceResult RankRunner::measure(const Row& row, bool inPlace, std::string& error, bool& fatal) {
  PlaceResult place;
  const char* algorithm = nullptr;
  if (!row.regs.empty() && occlCollGetAlgorithm(comm_, row.regs.front().collId, inPlace ? 1 : 0, &algorithm) == occlSuccess)
    place.algorithm = algorithm;
  const Layout layout = layoutFor(row.plan, inPlace);
  const RunBuffers buffers = layout.device();
  auto record = [&](const RunStatus& s) {
    if (s.ok()) return;
    if (error.empty()) error = s.error;
    fatal = fatal || s.lost;
  };
  const IterCounts counts = itersFor(options_, row.plan.bytes);
  if (error.empty()) writeInputs(row, layout);
  for (int i = 0; i < counts.warmup && error.empty(); ++i) record(runOnce(row, buffers));
  if (fatal) return place;
  if (RunStatus s = barrier(); !s.ok()) {
    error = "barrier: " + s.error;
    fatal = true;
    return place;
  }
  // simt: the timed runs' bus crossings (device/simt_crossings.hpp). The counts are the process's,
  // so its ranks meet (a thread barrier, no collective) around the reads: between the meetings
  // only the timed collectives run.
  const bool counting = exec::simt::countingCrossings();
  exec::simt::Crossings before;
  if (counting) {
    if (localSync_ != nullptr) localSync_->arrive_and_wait();
    before = exec::simt::crossings();
    if (localSync_ != nullptr) localSync_->arrive_and_wait();
  }
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < counts.timed && error.empty(); ++i) record(runOnce(row, buffers));
  const auto stop = std::chrono::steady_clock::now();
  if (counting) {
    if (localSync_ != nullptr) localSync_->arrive_and_wait();
    if (error.empty()) place.crossings = perCollective(before, exec::simt::crossings(), counts.timed, row.regs.size());
  }
  if (options_.timeline && rank_ == 0 && error.empty()) place.phases = phases(row, counts.timed);
  if (!error.empty()) return place;
  place.timeUs = std::chrono::duration<double, std::micro>(stop - start).count() / counts.timed;
  if (options_.check > 0) place.wrong = 0;
  for (int c = 0; c < options_.check; ++c) {
    prepareCheck(row, layout);
    record(runOnce(row, buffers));
    if (!error.empty()) return place;
    place.wrong += checkResults(row, layout);
  }
  place.ran = true;
  return place;
}

}  // namespace occl::bench
