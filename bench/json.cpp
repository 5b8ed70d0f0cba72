// --json FILE: the table as machine-readable JSON, written by rank 0 at the end of the run.
#include <cmath>
#include <cstdio>

#include "report.hpp"

namespace occl::bench {
namespace {

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char esc[8];
          std::snprintf(esc, sizeof esc, "\\u%04x", c);
          out += esc;
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  return out + "\"";
}

std::string number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string place(const PlaceResult& p) {
  if (!p.ran) return "null";
  return "{\"time_us\": " + number(p.timeUs) + ", \"algbw_gbps\": " + number(p.algBw) +
         ", \"busbw_gbps\": " + number(p.busBw) + ", \"wrong\": " + (p.wrong < 0 ? "null" : std::to_string(p.wrong)) +
         "}";
}

std::string row(const RowResult& r, bool nccl) {
  std::string s = "{\"size\": " + std::to_string(r.bytes) + ", \"count\": " + std::to_string(r.count) +
                  ", \"type\": " + quoted(dtypeName(r.dtype)) +
                  ", \"redop\": " + quoted(r.op < 0 ? "none" : opName(r.op)) + ", \"root\": " + std::to_string(r.root);
  if (nccl) s += ", \"nccl\": " + place(r.nccl);
  if (!r.error.empty()) return s + ", \"error\": " + quoted(r.error) + "}";
  return s + ", \"out_of_place\": " + place(r.outOfPlace) + ", \"in_place\": " + place(r.inPlace) + "}";
}

}  // namespace

void writeJson(std::ostream& out, const Report& report) {
  const Options& o = report.options();
  out << "{\n  \"collective\": " << quoted(collName(o.coll)) << ",\n  \"nranks\": " << report.nRanks()
      << ",\n  \"backend\": \"" << report.backendName() << "\",\n  \"options\": {\"minbytes\": " << o.minBytes << ", \"maxbytes\": " << o.maxBytes
      << ", \"stepfactor\": " << o.stepFactor << ", \"stepbytes\": " << o.stepBytes << ", \"iters\": " << o.iters
      << ", \"warmup_iters\": " << o.warmupIters << ", \"small_iters\": " << o.smallIters
      << ", \"small_max\": " << o.smallMaxBytes << ", \"settle_iters\": " << o.settleIters << ", \"check\": " << (o.check ? 1 : 0) << ", \"root\": " << o.root
      << ", \"ngpus\": " << o.localRanks << ", \"algorithm\": " << (o.algorithm.empty() ? "null" : quoted(o.algorithm))
      << ", \"blocks\": " << o.blocks << ", \"shared_buffers\": " << o.sharedBuffers << "},\n  \"results\": [";
  const auto& rows = report.rows();
  for (size_t i = 0; i < rows.size(); ++i) out << (i ? ",\n    " : "\n    ") << row(rows[i], o.compareNccl);
  out << (rows.empty() ? "" : "\n  ") << "],\n  \"out_of_bounds\": " << report.wrongTotal()
      << ",\n  \"failed_rows\": " << report.failedRows() << ",\n  \"avg_busbw_gbps\": " << number(report.avgBusBw())
      << "\n}\n";
}

}  // namespace occl::bench
