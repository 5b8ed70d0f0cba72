// Output in nccl-tests' format (so that the scripts that parse all_reduce_perf's output read
// occl-bench's unchanged): a "#" preamble, one row per size with out-of-place and in-place
// columns, and the closing "Out of bounds values" / "Avg bus bandwidth" lines. Rows that failed
// are "#" comment lines naming the size and the reason, which such scripts skip.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "occl/occl.h"
#include "options.hpp"

namespace occl::bench {

// What the header and the JSON call the backend that ran (auto is resolved before a run).
inline const char* backendName(int backend) {
  return backend == occlBackendCuda ? "cuda" : backend == occlBackendSimt ? "simt" : "host";
}

struct PlaceResult {
  bool ran = false;    // false: not applicable (printed N/A)
  double timeUs = 0;   // per iteration, max over ranks
  double algBw = 0;    // GB/s
  double busBw = 0;    // GB/s
  int64_t wrong = -1;  // summed over ranks; -1 = not checked (-c 0)
  std::string algorithm;  // what ran (occlCollGetAlgorithm), as rank 0 registered it
  // The simt backend's count of the timed runs' bus crossings (device/simt_crossings.hpp), per
  // collective and rank; absent on the other backends.
  struct Crossings {
    double reads = 0;   // including the SQ poll that found the entry, one per daemon block
    double writes = 0;
    double waitLooks = 0;    // looks for new submissions by waits that were not ready
    uint64_t idlePolls = 0;  // the other SQ polls of the timed runs, all ranks of this process
  };
  std::optional<Crossings> crossings;
  // --timeline, rank 0: medians over the timed runs' submissions of the part that completed each,
  // in microseconds after its block took the SQE (occlCommGetTimeline).
  struct Phases {
    double startedUs = 0;
    double firstDataUs = 0;
    double lastDataUs = 0;
    double doneUs = 0;
    size_t submissions = 0;
  };
  std::optional<Phases> phases;
};

struct RowResult {
  uint64_t bytes = 0;
  uint64_t count = 0;
  int dtype = 0;
  int op = -1;    // -1: a collective without an operator ("none")
  int root = -1;  // -1: a collective without a root
  PlaceResult outOfPlace;
  PlaceResult inPlace;
  std::string error;  // non-empty: the row failed and has no numbers
  PlaceResult nccl;   // --compare nccl: NCCL out of place on the same size (ran = false: not measured)
};

struct RankInfo {
  int64_t pid = 0;
  std::string host;
  int device = -1;  // the rank's CUDA device; -1: host ranks
  int peersBy[4] = {0, 0, 0, 0};  // its peers reached in-process, through shared memory, over the NET connector,
                                  // through device memory (cuda-ipc, simt-ipc)
};

// Fills algBw/busBw of `place` from its time and the row's size.
void setBandwidth(PlaceResult& place, uint64_t bytes, double busBwFactor);

std::string formatTime(double us);
std::string tableHeader();
std::string formatRow(const RowResult& row);
std::string formatFailedRow(const RowResult& row);
// "# nccl" comment line: the row's size columns, NCCL's time and bandwidths, and occl's
// out-of-place time over NCCL's.
std::string formatNcclRow(const RowResult& row);
std::string formatFooter(int64_t wrongTotal, double avgBusBw);
std::string formatPreamble(const Options& options, int nRanks, const std::vector<RankInfo>& ranks);

// One rank's view of the whole run (rows hold the numbers agreed by all ranks): keeps the rows for
// the summary and JSON, and prints them as they arrive when it has a stream (rank 0's).
class Report {
 public:
  Report(std::ostream* out, const Options& options, int nRanks) : out_(out), options_(options), nRanks_(nRanks) {}

  void begin(const std::vector<RankInfo>& ranks);
  void note(const std::string& line);  // a "# " line
  void row(const RowResult& row);
  void end();
  // --compare nccl, after end(): NCCL's numbers for rows()[index], printed and kept for JSON.
  void ncclRow(size_t index, const PlaceResult& nccl);

  const std::vector<RowResult>& rows() const { return rows_; }
  const char* backendName() const { return bench::backendName(options_.backend); }
  int64_t wrongTotal() const;
  double avgBusBw() const;
  int failedRows() const;
  std::string algorithmTally() const;
  std::string crossingFooter() const;
  std::string timelineFooter() const;
  int nRanks() const { return nRanks_; }
  const Options& options() const { return options_; }

 private:
  void print(const std::string& text);

  std::ostream* out_;  // nullptr: a rank that does not print
  const Options& options_;
  int nRanks_;
  std::vector<RowResult> rows_;
};

// The run as JSON: options, one object per row, the summary.
void writeJson(std::ostream& out, const Report& report);

}  // namespace occl::bench
