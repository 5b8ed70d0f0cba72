// compare_nccl.hpp where the build found NCCL: one host::NcclSession over the devices for the
// whole sweep (communicator set-up is paid once), a row at a time.
#include <cstdio>

#include "compare_nccl.hpp"
#include "nccl_compare.hpp"
#include "plan.hpp"

namespace occl::bench {
namespace {

// The copy that the bus bandwidths can be read against: large enough to reach the memory
// system's rate, small enough to take milliseconds.
constexpr size_t kCopyBytes = size_t{256} << 20;
constexpr int kCopyIters = 20;

std::string deviceList(const std::vector<int>& devices) {
  std::string s;
  for (size_t i = 0; i < devices.size(); ++i) {
    if (i > 0) s += ',';
    s += std::to_string(devices[i]);
  }
  return s;
}

std::string versionText(int code) {
  // NCCL_VERSION_CODE since 2.9: major * 10000 + minor * 100 + patch.
  return std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) + "." + std::to_string(code % 100);
}

host::NcclRunSpec specFor(const Options& o, const RowResult& row) {
  host::NcclRunSpec spec;
  spec.coll = collType(o.coll);
  spec.bytes = row.bytes;
  spec.datatype = row.dtype;
  spec.op = row.op < 0 ? occlSum : row.op;
  spec.root = row.root < 0 ? 0 : row.root;
  const IterCounts counts = itersFor(o, row.bytes);
  spec.warmupIters = counts.warmup;
  spec.iters = counts.timed;
  spec.pipelined = false;  // each iteration waited for, as each of occl's waits for its callback
  return spec;
}

}  // namespace

std::string ncclMissingFromBuild() { return ""; }

std::string compareWithNccl(const Options& o, const std::vector<int>& devices, Report& report) {
  occl::Result<std::unique_ptr<host::NcclSession>> session = host::NcclSession::open(devices);
  if (!session.ok()) return "--compare nccl: " + session.status().message;
  report.note("NCCL " + versionText(session.value()->ncclVersion()) + " on CUDA device(s) " + deviceList(devices) +
              ", out of place, each iteration launched and waited for; last column: occl's out-of-place time / "
              "NCCL's");
  if (occl::Result<double> copy = host::deviceCopyBandwidthGBs(devices.front(), kCopyBytes, kCopyIters); copy.ok()) {
    char line[160];
    std::snprintf(line, sizeof line, "device %d copies device to device at %.1f GB/s (%zu MiB cudaMemcpyAsync)",
                  devices.front(), copy.value(), kCopyBytes >> 20);
    report.note(line);
  } else {
    report.note("device copy bandwidth: " + copy.status().message);
  }
  const double factor = busBwFactor(o.coll, static_cast<int>(devices.size()));
  for (size_t i = 0; i < report.rows().size(); ++i) {
    occl::Result<double> us = session.value()->timeUs(specFor(o, report.rows()[i]));
    if (!us.ok()) return "--compare nccl: " + std::to_string(report.rows()[i].bytes) + " B: " + us.status().message;
    PlaceResult nccl;
    nccl.ran = true;
    nccl.timeUs = us.value();
    setBandwidth(nccl, report.rows()[i].bytes, factor);
    report.ncclRow(i, nccl);
  }
  return "";
}

}  // namespace occl::bench
