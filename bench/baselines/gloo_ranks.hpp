// How a Gloo baseline's ranks meet (gloo-allreduce-bench, gloo-moe-bench): as threads of one
// process through an in-memory store, or one per process through a file store in GLOO_STORE_DIR
// (RANK/WORLD_SIZE, or mpirun's OMPI_COMM_WORLD_RANK/SIZE); each rank's context on one TCP device
// bound to 127.0.0.1, or to the interface GLOO_SOCKET_IFNAME names, as torch.distributed's Gloo.
#pragma once

#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

namespace occl::bench::gloo_ranks {

inline gloo::transport::tcp::attr deviceAttr() {
  gloo::transport::tcp::attr attr;
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname != nullptr && *ifname != '\0') {
    attr.iface = ifname;
  } else {
    attr.hostname = "127.0.0.1";
  }
  return attr;
}

// What the preamble says the ranks talk over.
inline std::string where() {
  const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
  return ifname != nullptr && *ifname != '\0' ? std::string("interface ") + ifname : std::string("127.0.0.1");
}

// A full mesh of `nRanks` ranks met through `store`, one TCP device (one event-loop thread) per
// rank, as each rank would have in its own process.
inline std::shared_ptr<gloo::Context> connect(gloo::rendezvous::Store& store, int rank, int nRanks) {
  auto device = gloo::transport::tcp::CreateDevice(deviceAttr());
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, nRanks);
  context->connectFullMesh(store, device);
  return context;
}

// What every baseline's ranks agree on through Gloo itself: a barrier, and the max or the sum of
// one double.
inline void barrier(const std::shared_ptr<gloo::Context>& context) {
  gloo::BarrierOptions opts(context);
  gloo::barrier(opts);
}
inline double reduce(const std::shared_ptr<gloo::Context>& context, double value, bool max) {
  gloo::AllreduceOptions opts(context);
  opts.setOutput(&value, 1);
  using ReduceFn = void (*)(void*, const void*, const void*, size_t);
  opts.setReduceFunction(max ? static_cast<ReduceFn>(&gloo::max<double>) : static_cast<ReduceFn>(&gloo::sum<double>));
  gloo::allreduce(opts);
  return value;
}

inline std::optional<int> envInt(const char* torchrun, const char* mpirun) {
  for (const char* name : {torchrun, mpirun})
    if (const char* v = std::getenv(name); v != nullptr && *v != '\0') return std::atoi(v);
  return std::nullopt;
}

// Where this process's ranks come from: threads (`localRanks` of them), or this process's rank
// of a launched job. `error` says what is missing or inconsistent, "" if nothing.
struct Placement {
  bool processes = false;
  int rank = 0;
  int nRanks = 0;
  std::string storeDir;
  std::string error;
};
inline Placement placement(int localRanks, bool launched) {
  Placement p;
  const std::optional<int> rank = envInt("RANK", "OMPI_COMM_WORLD_RANK");
  const std::optional<int> size = envInt("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE");
  const char* storeDir = std::getenv("GLOO_STORE_DIR");
  p.processes = launched || rank.has_value() || size.has_value();
  if (p.processes && (!rank || !size || storeDir == nullptr || *storeDir == '\0'))
    p.error = "one rank per process needs RANK and WORLD_SIZE (or mpirun's) and GLOO_STORE_DIR, an empty directory";
  else if (p.processes && localRanks != 1)
    p.error = "-g/--ngpus: expected 1 with one rank per process";
  else if ((p.processes ? *size : localRanks) < 2)
    p.error = "gloo needs at least 2 ranks: use -g N or one process per rank";
  if (!p.error.empty()) return p;
  p.rank = p.processes ? *rank : 0;
  p.nRanks = p.processes ? *size : localRanks;
  p.storeDir = p.processes ? storeDir : "";
  return p;
}

}  // namespace occl::bench::gloo_ranks
