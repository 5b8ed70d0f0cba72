// Transport selection (transport/select.hpp): the first transport of the table that accepts a pair
// carries it. A pid names a process only together with its pid namespace, and processes of one
// host share memory only where they share /dev/shm.
#include <gtest/gtest.h>

#include "transport/select.hpp"

namespace occl::transport {
namespace {

constexpr uint64_t kHostPids = 4026531836;  // inodes of pid namespaces
constexpr uint64_t kContainerPids = 4026532177;
constexpr uint64_t kHostShm = 0x1a;  // devices of /dev/shm
constexpr uint64_t kContainerShm = 0x2b;

PeerInfo at(const char* host, uint64_t pids, uint64_t shm, uint64_t pid) {
  return makePeerInfo(host, {.pidNamespace = pids, .shmDevice = shm, .process = pid});
}

TEST(TransportSelectTest, OneProcessIsInProcessAndOneHostIsShm) {
  const PeerInfo self = at("hostA", kHostPids, kHostShm, 4242);
  EXPECT_EQ(selectTransport(self, at("hostA", kHostPids, kHostShm, 4242), {}), Transport::InProcess);
  EXPECT_EQ(selectTransport(self, at("hostA", kHostPids, kHostShm, 4243), {}), Transport::Shm);
  EXPECT_EQ(selectTransport(self, at("hostB", kHostPids, kHostShm, 4242), {}), Transport::Net);
  // OCCL_TRANSPORT=net moves the other processes of the host to the network, not this process's ranks.
  EXPECT_EQ(selectTransport(self, at("hostA", kHostPids, kHostShm, 4243), {true}), Transport::Net);
  EXPECT_EQ(selectTransport(self, at("hostA", kHostPids, kHostShm, 4242), {true}), Transport::InProcess);
}

// Two containers sharing the host's network and /dev/shm, each running its rank as pid 1: one
// host, two processes. Taken for one process, each would read the other's addresses as its own.
TEST(TransportSelectTest, TheSamePidInAnotherPidNamespaceIsAnotherProcess) {
  const PeerInfo self = at("hostA", kHostPids, kHostShm, 1);
  const PeerInfo other = at("hostA", kContainerPids, kHostShm, 1);
  EXPECT_EQ(selectTransport(self, other, {}), Transport::Shm);
  EXPECT_EQ(selectTransport(other, self, {}), Transport::Shm);
}

// Two containers on the host's network, each with a /dev/shm of its own: shm segments made by
// name in one are not in the other, so only the network joins them.
TEST(TransportSelectTest, ProcessesWithADevShmEachTakeTheNetwork) {
  const PeerInfo self = at("hostA", kHostPids, kHostShm, 7);
  const PeerInfo other = at("hostA", kHostPids, kContainerShm, 8);
  EXPECT_EQ(selectTransport(self, other, {}), Transport::Net);
  EXPECT_EQ(selectTransport(other, self, {}), Transport::Net);
  EXPECT_STREQ(transportName(selectTransport(self, other, {})), "net");
}

// A host whose ranks mix CUDA and the host backend lays out its shm connectors in whole pages on
// every rank, so both ends of each connector ask the pool for the same range; other hosts, and a
// container with its own /dev/shm, pack theirs.
TEST(TransportSelectTest, AnyCudaRankOfADevShmMakesItsConnectorsWholePages) {
  const std::vector<PeerInfo> ranks = {at("hostA", kHostPids, kHostShm, 1), at("hostA", kHostPids, kHostShm, 2),
                                       at("hostB", kHostPids, kHostShm, 3), at("hostA", kHostPids, kContainerShm, 4)};
  EXPECT_EQ(shmRangesFor(ranks, {0, 0, 0, 0}, 0), ShmRanges::Packed);
  const std::vector<int32_t> secondIsCuda = {0, 1, 0, 0};
  EXPECT_EQ(shmRangesFor(ranks, secondIsCuda, 0), ShmRanges::WholePages);
  EXPECT_EQ(shmRangesFor(ranks, secondIsCuda, 1), ShmRanges::WholePages);
  EXPECT_EQ(shmRangesFor(ranks, secondIsCuda, 2), ShmRanges::Packed);
  EXPECT_EQ(shmRangesFor(ranks, secondIsCuda, 3), ShmRanges::Packed);
}

}  // namespace
}  // namespace occl::transport
