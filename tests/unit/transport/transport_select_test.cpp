// Transport selection (transport/select.hpp): the first transport of the table that accepts a pair
// carries it. A pid names a process only together with its pid namespace, and processes of one
// host share memory only where they share /dev/shm.
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <vector>

#include "transport/select.hpp"
#include "transport/shm/setup.hpp"

namespace occl::transport {
namespace {

constexpr uint64_t kHostPids = 4026531836;  // inodes of pid namespaces
constexpr uint64_t kContainerPids = 4026532177;
constexpr uint64_t kHostShm = 0x1a;  // devices of /dev/shm
constexpr uint64_t kContainerShm = 0x2b;

RankInfo at(const char* host, uint64_t pids, uint64_t shm, uint64_t pid, DaemonInfo daemon = {}) {
  return {makePeerInfo(host, {.pidNamespace = pids, .shmDevice = shm, .process = pid}), daemon};
}

DaemonInfo simt() {
  DaemonInfo d;
  d.kind = DaemonKind::Simt;
  return d;
}

// A CUDA rank on GPU `gpu` that reaches `reach` by peer access.
DaemonInfo cuda(uint64_t gpu, std::vector<uint64_t> reach = {}, bool canExport = true) {
  DaemonInfo d;
  d.kind = DaemonKind::Cuda;
  d.gpu = gpu;
  d.canExport = canExport ? 1 : 0;
  for (uint64_t g : reach) d.reach[d.nReach++] = g;
  return d;
}

TEST(TransportSelectTest, OneProcessIsInProcessAndOneHostIsShm) {
  const RankInfo self = at("hostA", kHostPids, kHostShm, 4242);
  EXPECT_EQ(selectTransport(self, at("hostA", kHostPids, kHostShm, 4242), {}), Transport::InProcess);
  EXPECT_EQ(selectTransport(self, at("hostA", kHostPids, kHostShm, 4243), {}), Transport::Shm);
  EXPECT_EQ(selectTransport(self, at("hostB", kHostPids, kHostShm, 4242), {}), Transport::Net);
  // OCCL_TRANSPORT=net moves the other processes of the host to the network, not this process's ranks.
  EXPECT_EQ(selectTransport(self, at("hostA", kHostPids, kHostShm, 4243), {.forceNet = true}), Transport::Net);
  EXPECT_EQ(selectTransport(self, at("hostA", kHostPids, kHostShm, 4242), {.forceNet = true}), Transport::InProcess);
}

// Two containers sharing the host's network and /dev/shm, each running its rank as pid 1: one
// host, two processes. Taken for one process, each would read the other's addresses as its own.
TEST(TransportSelectTest, TheSamePidInAnotherPidNamespaceIsAnotherProcess) {
  const RankInfo self = at("hostA", kHostPids, kHostShm, 1);
  const RankInfo other = at("hostA", kContainerPids, kHostShm, 1);
  EXPECT_EQ(selectTransport(self, other, {}), Transport::Shm);
  EXPECT_EQ(selectTransport(other, self, {}), Transport::Shm);
}

// Two containers on the host's network, each with a /dev/shm of its own: shm segments made by
// name in one are not in the other, so only the network joins them.
TEST(TransportSelectTest, ProcessesWithADevShmEachTakeTheNetwork) {
  const RankInfo self = at("hostA", kHostPids, kHostShm, 7);
  const RankInfo other = at("hostA", kHostPids, kContainerShm, 8);
  EXPECT_EQ(selectTransport(self, other, {}), Transport::Net);
  EXPECT_EQ(selectTransport(other, self, {}), Transport::Net);
  EXPECT_STREQ(transportName(selectTransport(self, other, {})), "net");
}

// A host whose ranks mix CUDA and the host backend lays out its shm connectors in whole pages on
// every rank, so both ends of each connector ask the pool for the same range; other hosts, and a
// container with its own /dev/shm, pack theirs.
TEST(TransportSelectTest, AnyCudaRankOfADevShmMakesItsConnectorsWholePages) {
  std::vector<RankInfo> ranks = {at("hostA", kHostPids, kHostShm, 1), at("hostA", kHostPids, kHostShm, 2),
                                 at("hostB", kHostPids, kHostShm, 3), at("hostA", kHostPids, kContainerShm, 4)};
  EXPECT_EQ(shm::rangesFor(ranks, 0), ShmRanges::Packed);
  ranks[1].daemon = cuda(0x61);
  EXPECT_EQ(shm::rangesFor(ranks, 0), ShmRanges::WholePages);
  EXPECT_EQ(shm::rangesFor(ranks, 1), ShmRanges::WholePages);
  EXPECT_EQ(shm::rangesFor(ranks, 2), ShmRanges::Packed);
  EXPECT_EQ(shm::rangesFor(ranks, 3), ShmRanges::Packed);
}

// Device ranks of two processes of a host share device memory (transport/ipc/) where it can carry
// their FIFOs: simt processes always, CUDA ranks on one GPU, or on GPUs that reach each other by
// peer access as both processes see it, with pools that export as file descriptors. Otherwise
// shared memory, as between host ranks; OCCL_TRANSPORT=shm or net asks for those.
TEST(TransportSelectTest, DeviceRanksOfTwoProcessesShareDeviceMemoryWhereTheirGpusReachEachOther) {
  const RankInfo simtA = at("hostA", kHostPids, kHostShm, 1, simt()), simtB = at("hostA", kHostPids, kHostShm, 2, simt());
  EXPECT_EQ(selectTransport(simtA, simtB, {}), Transport::DeviceIpc);
  EXPECT_STREQ(transportName(selectTransport(simtA, simtB, {})), "device-ipc");
  EXPECT_EQ(selectTransport(simtA, simtA, {}), Transport::InProcess);
  EXPECT_EQ(selectTransport(simtA, simtB, {.forceShm = true}), Transport::Shm);
  EXPECT_EQ(selectTransport(simtA, simtB, {.forceNet = true}), Transport::Net);
  EXPECT_EQ(selectTransport(simtA, at("hostA", kHostPids, kHostShm, 2), {}), Transport::Shm) << "simt with host";
  EXPECT_EQ(selectTransport(simtA, at("hostA", kHostPids, kContainerShm, 2, simt()), {}), Transport::Net)
      << "no /dev/shm in common: nowhere to pair the ends";

  const uint64_t gpu0 = 0x100, gpu1 = 0x101, gpu2 = 0x102;
  const RankInfo onGpu0 = at("hostA", kHostPids, kHostShm, 1, cuda(gpu0, {gpu1}));
  EXPECT_EQ(selectTransport(onGpu0, at("hostA", kHostPids, kHostShm, 2, cuda(gpu0, {gpu1})), {}), Transport::DeviceIpc)
      << "two processes on one GPU";
  EXPECT_EQ(selectTransport(onGpu0, at("hostA", kHostPids, kHostShm, 2, cuda(gpu1, {gpu0})), {}), Transport::DeviceIpc)
      << "GPUs that reach each other";
  EXPECT_EQ(selectTransport(onGpu0, at("hostA", kHostPids, kHostShm, 2, cuda(gpu1, {})), {}), Transport::Shm)
      << "the peer's process does not see this GPU reached (CUDA_VISIBLE_DEVICES)";
  EXPECT_EQ(selectTransport(onGpu0, at("hostA", kHostPids, kHostShm, 2, cuda(gpu2, {gpu0})), {}), Transport::Shm)
      << "this GPU does not reach the peer's";
  EXPECT_EQ(selectTransport(onGpu0, at("hostA", kHostPids, kHostShm, 2, cuda(gpu0, {}, /*canExport=*/false)), {}),
            Transport::Shm)
      << "pools that cannot be exported";
  EXPECT_EQ(selectTransport(onGpu0, at("hostA", kHostPids, kHostShm, 2, simt()), {}), Transport::Shm) << "CUDA with simt";
  EXPECT_EQ(selectTransport(onGpu0, at("hostB", kHostPids, kHostShm, 2, cuda(gpu0, {gpu1})), {}), Transport::Net);
}

// Every rank evaluates the table for every pair: both ends must choose alike.
TEST(TransportSelectTest, TheChoiceIsTheSameFromBothEnds) {
  const std::vector<RankInfo> ranks = {
      at("hostA", kHostPids, kHostShm, 1, cuda(0x100, {0x101})), at("hostA", kHostPids, kHostShm, 2, cuda(0x101, {0x100})),
      at("hostA", kHostPids, kHostShm, 3, cuda(0x102, {0x100})), at("hostA", kHostPids, kHostShm, 4, simt()),
      at("hostA", kHostPids, kHostShm, 5, simt()),               at("hostA", kHostPids, kHostShm, 6),
      at("hostB", kHostPids, kHostShm, 7, simt())};
  for (const SelectionPolicy policy : {SelectionPolicy{}, SelectionPolicy{.forceNet = true}, SelectionPolicy{.forceShm = true}})
    for (const RankInfo& a : ranks)
      for (const RankInfo& b : ranks)
        EXPECT_EQ(selectTransport(a, b, policy), selectTransport(b, a, policy)) << a.place.process << " " << b.place.process;
}

// The table also makes the factories (select.hpp, makeConnectors): one for every transport that
// some pair takes, on every rank, the in-process row with shm's maker (a rank's connectors to
// itself pair up in the job's pool as those of two processes do).
TEST(TransportSelectTest, TheTableMakesAFactoryForEachTransportAPairTakes) {
  const std::vector<RankInfo> ranks = {at("hostA", kHostPids, kHostShm, 1), at("hostA", kHostPids, kHostShm, 2),
                                       at("hostA", kHostPids, kHostShm, 2)};
  EXPECT_EQ(takenByAnyPair(ranks, {}), (std::set<Transport>{Transport::InProcess, Transport::Shm}));
  EXPECT_EQ(takenByAnyPair(ranks, {.forceNet = true}), (std::set<Transport>{Transport::InProcess, Transport::Net}));
  const std::vector<RankInfo> twoHosts = {at("hostA", kHostPids, kHostShm, 1), at("hostB", kHostPids, kHostShm, 1),
                                          at("hostB", kHostPids, kHostShm, 2)};
  EXPECT_EQ(takenByAnyPair(twoHosts, {}),
            (std::set<Transport>{Transport::InProcess, Transport::Shm, Transport::Net}))
      << "hostB's pair takes shm, though rank 0 has no shm peer";

  int gathers = 0;
  const TransportSetup setup{.rank = 1,
                             .ranks = ranks,
                             .byPeer = {Transport::Shm, Transport::InProcess, Transport::InProcess},
                             .taken = {Transport::InProcess, Transport::Shm},
                             .nonce = 0x5e1ec7ab1e000001,
                             .timeoutMs = 5000,
                             .allGather = [&](void*, size_t) {
                               ++gathers;
                               return Status::success();
                             }};
  Result<std::unique_ptr<ConnectorFactory>> made = makeConnectors(setup);
  ASSERT_TRUE(made.ok()) << made.status().message;
  EXPECT_STREQ(made.value()->transportTo(0), "shm");
  EXPECT_STREQ(made.value()->transportTo(1), "shm") << "the in-process row makes an shm factory";
  EXPECT_STREQ(made.value()->transportTo(3), "none");
  EXPECT_EQ(gathers, 0) << "shm needs no exchange with the peers";
}

// Where a transport some pair needs fails, or is not in this build, init names the ranks.
TEST(TransportSelectTest, AMissingOrFailingTransportNamesWhereItsPeersRun) {
  TransportSetup s;
  s.ranks = {at("hostA", kHostPids, kHostShm, 1), at("hostA", kHostPids, kContainerShm, 2),
             at("hostB", kHostPids, kHostShm, 3)};
  s.byPeer = {Transport::InProcess, Transport::Net, Transport::Net};
  EXPECT_EQ(s.whereFirstPeer(Transport::Net),
            "ranks 0 and 1 run on host \"hostA\" with a /dev/shm each (devices 0x1a and 0x2b)");
  s.byPeer = {Transport::InProcess, Transport::Shm, Transport::Net};
  EXPECT_EQ(s.whereFirstPeer(Transport::Net), "rank 0 runs on host \"hostA\" and rank 2 on \"hostB\"");
  s.byPeer = {Transport::InProcess, Transport::Shm, Transport::Shm};
  EXPECT_EQ(s.whereFirstPeer(Transport::Net), "rank 0 runs on host \"hostA\" and rank 0 on \"hostA\"")
      << "no peer over it: this rank alone (another pair takes it)";
}

}  // namespace
}  // namespace occl::transport
