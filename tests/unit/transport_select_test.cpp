// Transport selection (transport/select.hpp): the first transport of the table that accepts a pair
// carries it, and a pid names a process only together with its pid namespace.
#include <gtest/gtest.h>

#include "transport/select.hpp"

namespace occl::transport {
namespace {

constexpr uint64_t kHostPids = 4026531836;   // an inode of a pid namespace
constexpr uint64_t kContainerPids = 4026532177;

TEST(TransportSelectTest, OneProcessIsInProcessAndOneHostIsShm) {
  const PeerInfo self = makePeerInfo("hostA", kHostPids, 4242);
  EXPECT_EQ(selectTransport(self, makePeerInfo("hostA", kHostPids, 4242), {}), Transport::InProcess);
  EXPECT_EQ(selectTransport(self, makePeerInfo("hostA", kHostPids, 4243), {}), Transport::Shm);
  EXPECT_EQ(selectTransport(self, makePeerInfo("hostB", kHostPids, 4242), {}), Transport::Net);
  // OCCL_TRANSPORT=net moves the other processes of the host to the network, not this process's ranks.
  EXPECT_EQ(selectTransport(self, makePeerInfo("hostA", kHostPids, 4243), {true}), Transport::Net);
  EXPECT_EQ(selectTransport(self, makePeerInfo("hostA", kHostPids, 4242), {true}), Transport::InProcess);
}

// Two containers sharing the host's network and /dev/shm, each running its rank as pid 1: one
// host, two processes. Taken for one process, each would read the other's addresses as its own.
TEST(TransportSelectTest, TheSamePidInAnotherPidNamespaceIsAnotherProcess) {
  const PeerInfo self = makePeerInfo("hostA", kHostPids, 1);
  const PeerInfo other = makePeerInfo("hostA", kContainerPids, 1);
  EXPECT_EQ(selectTransport(self, other, {}), Transport::Shm);
  EXPECT_EQ(selectTransport(other, self, {}), Transport::Shm);
  EXPECT_STREQ(transportName(selectTransport(self, other, {})), "shm");
}

}  // namespace
}  // namespace occl::transport
