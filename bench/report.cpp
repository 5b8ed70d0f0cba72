#include "report.hpp"

#include <algorithm>
#include <cstdarg>
#include <cstdio>

#include "occl/occl.h"

namespace occl::bench {
namespace {

std::string printf_(const char* format, ...) __attribute__((format(printf, 1, 2)));
std::string printf_(const char* format, ...) {
  char buffer[512];
  va_list args;
  va_start(args, format);
  const int n = std::vsnprintf(buffer, sizeof buffer, format, args);
  va_end(args);
  return std::string(buffer, static_cast<size_t>(std::max(0, std::min<int>(n, sizeof buffer - 1))));
}

// Column widths of nccl-tests' table: size, count, type, redop, root, then per place time,
// algbw, busbw, #wrong (each after a two-space gap).
std::string formatPlace(const PlaceResult& p) {
  if (!p.ran) return printf_("  %7s  %6s  %6s  %5s", "N/A", "N/A", "N/A", "N/A");
  const std::string wrong = p.wrong < 0 ? "N/A" : std::to_string(p.wrong);
  return printf_("  %7s  %6.2f  %6.2f  %5s", formatTime(p.timeUs).c_str(), p.algBw, p.busBw, wrong.c_str());
}

std::string opLabel(int op) { return op < 0 ? "none" : opName(op); }

}  // namespace

void setBandwidth(PlaceResult& place, uint64_t bytes, double busBwFactor) {
  // bytes / 1e9 / (us * 1e-6) = bytes / 1e3 / us
  place.algBw = place.timeUs > 0 ? static_cast<double>(bytes) / 1.0e3 / place.timeUs : 0.0;
  place.busBw = place.algBw * busBwFactor;
}

std::string formatTime(double us) {
  // Three significant-ish digits in 7 columns, like nccl-tests.
  if (us >= 10000.0) return printf_("%7.0f", us);
  if (us >= 100.0) return printf_("%7.1f", us);
  return printf_("%7.2f", us);
}

std::string tableHeader() {
  const std::string sizeCols = "#       size         count      type   redop    root";
  const std::string placeCols = "     time   algbw   busbw #wrong";
  const std::string sizeUnits = "#        (B)    (elements)" + std::string(26, ' ');
  const std::string placeUnits = "     (us)  (GB/s)  (GB/s)       ";
  std::string groups = "#" + std::string(62, ' ') + "out-of-place" + std::string(23, ' ') + "in-place" +
                       std::string(10, ' ');
  return groups + "\n" + sizeCols + placeCols + placeCols + "\n" + sizeUnits + placeUnits + placeUnits + "\n";
}

std::string formatRow(const RowResult& row) {
  return printf_("%12llu  %12llu  %8s  %6s  %6d", static_cast<unsigned long long>(row.bytes),
                 static_cast<unsigned long long>(row.count), dtypeName(row.dtype), opLabel(row.op).c_str(), row.root) +
         formatPlace(row.outOfPlace) + formatPlace(row.inPlace) + "\n";
}

std::string formatFailedRow(const RowResult& row) {
  return printf_("#  size %llu count %llu type %s redop %s root %d: FAILED: ",
                 static_cast<unsigned long long>(row.bytes), static_cast<unsigned long long>(row.count),
                 dtypeName(row.dtype), opLabel(row.op).c_str(), row.root) +
         row.error + "\n";
}

std::string formatNcclRow(const RowResult& row) {
  const PlaceResult& n = row.nccl;
  const std::string ratio = row.error.empty() && row.outOfPlace.ran && n.timeUs > 0
                                ? printf_("%9.2f", row.outOfPlace.timeUs / n.timeUs)
                                : printf_("%9s", "N/A");
  return printf_("# nccl %12llu  %12llu  %8s  %6s  %6d", static_cast<unsigned long long>(row.bytes),
                 static_cast<unsigned long long>(row.count), dtypeName(row.dtype), opLabel(row.op).c_str(), row.root) +
         printf_("  %7s  %6.2f  %6.2f", formatTime(n.timeUs).c_str(), n.algBw, n.busBw) + "  " + ratio + "\n";
}

std::string formatFooter(int64_t wrongTotal, double avgBusBw) {
  return printf_("# Out of bounds values : %lld %s\n", static_cast<long long>(wrongTotal),
                 wrongTotal == 0 ? "OK" : "FAILED") +
         printf_("# Avg bus bandwidth    : %g \n", avgBusBw) + "#\n";
}

std::string formatPreamble(const Options& o, int nRanks, const std::vector<RankInfo>& ranks) {
  std::string s = printf_("# occl-bench %s: occl %d.%d.%d, %d rank(s), backend %s\n", collName(o.coll), OCCL_MAJOR,
                          OCCL_MINOR, OCCL_PATCH, nRanks, backendName(o.backend));
  const bool factor = o.stepFactor > 1;
  s += printf_(
      "# nThread %d nGpus %d minBytes %llu maxBytes %llu step: %llu(%s) warmup iters: %d iters: %d agg iters: 1 "
      "validation: %d graph: 0\n",
      o.threads, o.gpus, static_cast<unsigned long long>(o.minBytes), static_cast<unsigned long long>(o.maxBytes),
      static_cast<unsigned long long>(factor ? o.stepFactor : o.stepBytes), factor ? "factor" : "bytes",
      o.warmupIters, o.iters, o.check);
  s += iterationLines(o);
  if (!o.algorithm.empty()) s += "# algorithm: " + o.algorithm + "\n";
  if (o.blocks > 0) s += printf_("# blocks per collective: %d\n", o.blocks);
  if (o.sharedBuffers == 1) s += "# buffers: occlMemAlloc (desc.sharedBuffers)\n";
  s += "#\n# Using devices\n";
  for (size_t r = 0; r < ranks.size(); ++r) {
    std::string peers;
    static constexpr const char* kKinds[] = {"in-process", "shm", "net", "ipc"};
    for (int kind = 0; kind < 4; ++kind)
      if (ranks[r].peersBy[kind] > 0) peers += printf_("%s %d %s", peers.empty() ? " peers:" : ",", ranks[r].peersBy[kind], kKinds[kind]);
    s += printf_("#  Rank %2zu Group  0 Pid %6lld on %10s device %2d %s%s\n", r, static_cast<long long>(ranks[r].pid),
                 ranks[r].host.c_str(), ranks[r].device,
                 ranks[r].device >= 0                ? "[cuda] GPU daemon"
                 : o.backend == occlBackendSimt ? "[simt] GPU daemon on emulated blocks"
                                                     : "[host] CPU daemon",
                 peers.c_str());
  }
  return s + "#\n";
}

void Report::print(const std::string& text) {
  // Flushed per line so a long sweep shows progress, as nccl-tests does.
  if (out_ != nullptr) *out_ << text << std::flush;
}

void Report::begin(const std::vector<RankInfo>& ranks) { print(formatPreamble(options_, nRanks_, ranks) + tableHeader()); }

void Report::note(const std::string& line) { print("# " + line + "\n"); }

void Report::row(const RowResult& row) {
  rows_.push_back(row);
  print(row.error.empty() ? formatRow(row) : formatFailedRow(row));
}

void Report::end() {
  print(algorithmTally() + crossingFooter() + timelineFooter() + formatFooter(wrongTotal(), avgBusBw()));
}

// --timeline (PlaceResult::phases): a line per row and placement that has them.
std::string Report::timelineFooter() const {
  std::string s;
  for (const RowResult& r : rows_) {
    for (const PlaceResult* p : {&r.outOfPlace, &r.inPlace}) {
      if (!r.error.empty() || !p->ran || !p->phases) continue;
      if (s.empty()) s = "# timeline, medians in us after the daemon took the SQE (rank 0, the part that completed it):\n";
      const PlaceResult::Phases& t = *p->phases;
      s += printf_("#   %llu B %s: tried %+.2f, first data %+.2f, last data %+.2f, done %+.2f (%zu submissions)\n",
                   static_cast<unsigned long long>(r.bytes), p == &r.outOfPlace ? "out of place" : "in place",
                   t.startedUs, t.firstDataUs, t.lastDataUs, t.doneUs, t.submissions);
    }
  }
  return s;
}

// The simt backend's bus crossings (PlaceResult::crossings): per collective at the smallest size,
// and per MiB at the largest where it is a MiB or more. Out of place where it ran, else in place.
std::string Report::crossingFooter() const {
  auto placeOf = [](const RowResult& r) -> const PlaceResult* {
    if (!r.error.empty()) return nullptr;
    for (const PlaceResult* p : {&r.outOfPlace, &r.inPlace})
      if (p->ran && p->crossings) return p;
    return nullptr;
  };
  auto label = [](const RowResult& r, const PlaceResult* p) {
    return printf_("%llu B %s", static_cast<unsigned long long>(r.bytes), p == &r.outOfPlace ? "out of place" : "in place");
  };
  std::string s;
  auto first = std::find_if(rows_.begin(), rows_.end(), [&](const RowResult& r) { return placeOf(r) != nullptr; });
  if (first == rows_.end()) return s;
  const PlaceResult* p = placeOf(*first);
  s += printf_("# host crossings per collective: %.1f reads, %.1f writes (%s; %.2f looks from waits, %llu idle SQ polls)\n",
               p->crossings->reads, p->crossings->writes, label(*first, p).c_str(), p->crossings->waitLooks,
               static_cast<unsigned long long>(p->crossings->idlePolls));
  auto last = std::find_if(rows_.rbegin(), rows_.rend(), [&](const RowResult& r) { return placeOf(r) != nullptr; });
  constexpr uint64_t kMiB = uint64_t{1} << 20;
  if (last->bytes >= kMiB) {
    const PlaceResult* q = placeOf(*last);
    const double mib = static_cast<double>(last->bytes) / kMiB;
    s += printf_("# host crossings per MiB: %.1f reads, %.1f writes (%s)\n", q->crossings->reads / mib,
                 q->crossings->writes / mib, label(*last, q).c_str());
  }
  return s;
}

void Report::ncclRow(size_t index, const PlaceResult& nccl) {
  rows_.at(index).nccl = nccl;
  print(formatNcclRow(rows_[index]));
}

// "# algorithm: allgather_ring out-of-place 12, ring in-place 12": which algorithm ran how
// often, so a run of --algo shows where MSCCL's rules sent sizes to the built-in fallback.
std::string Report::algorithmTally() const {
  std::vector<std::pair<std::string, int>> counts;
  for (const RowResult& r : rows_) {
    for (auto [place, label] : {std::pair{&r.outOfPlace, "out-of-place"}, std::pair{&r.inPlace, "in-place"}}) {
      if (!r.error.empty() || !place->ran || place->algorithm.empty()) continue;
      const std::string key = place->algorithm + " " + label;
      auto it = std::find_if(counts.begin(), counts.end(), [&](const auto& c) { return c.first == key; });
      if (it == counts.end()) counts.emplace_back(key, 1);
      else it->second += 1;
    }
  }
  if (counts.empty()) return "";
  std::string line = "# algorithm:";
  for (size_t i = 0; i < counts.size(); ++i) line += printf_("%s %s %d", i == 0 ? "" : ",", counts[i].first.c_str(), counts[i].second);
  return line + "\n";
}

int64_t Report::wrongTotal() const {
  int64_t total = 0;
  for (const RowResult& r : rows_)
    for (const PlaceResult* p : {&r.outOfPlace, &r.inPlace})
      if (p->ran && p->wrong > 0) total += p->wrong;
  return total;
}

double Report::avgBusBw() const {
  double sum = 0;
  int n = 0;
  for (const RowResult& r : rows_)
    for (const PlaceResult* p : {&r.outOfPlace, &r.inPlace})
      if (r.error.empty() && p->ran) sum += p->busBw, ++n;
  return n > 0 ? sum / n : 0.0;
}

int Report::failedRows() const {
  int n = 0;
  for (const RowResult& r : rows_) n += r.error.empty() ? 0 : 1;
  return n;
}

}  // namespace occl::bench
