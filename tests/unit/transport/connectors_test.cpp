// The pairing rule of connectors (transport/connector.hpp): the k-th attach of a key by its sender
// meets the k-th attach by its receiver, and memory lives until both ends have attached and
// released it. A sender that finishes and deregisters before its receiver has registered must
// lose nothing, and a collId registered again must pair with the peer's next registration. And
// ConnectorMemory::populate: registration maps in the tiles a collective will use, and only those.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "support/dev_shm.hpp"
#include "support/ranks.hpp"
#include "transport/connector.hpp"
#include "transport/in_process/connectors.hpp"
#include "transport/shm/connectors.hpp"

namespace occl::test {
namespace {

using transport::ConnectorEnd;
using transport::ConnectorFactory;
using transport::ConnectorKey;
using transport::ConnectorMemory;

constexpr uint32_t kSlots = 2;
constexpr uint64_t kSlotBytes = 4096;

std::shared_ptr<ConnectorMemory> attach(ConnectorFactory& f, const ConnectorKey& key, ConnectorEnd end) {
  auto mem = f.attach(key, end, kSlots, kSlotBytes);
  if (!mem.ok()) throw std::runtime_error(mem.status().message);
  return mem.value();
}

// The sender's side of one message: the payload in slot 0, published as FIFO step 1.
void sendMarker(ConnectorMemory& m, uint8_t marker) {
  FifoHandle h{m.header(), m.data(), kSlots, 0, kSlotBytes};
  ASSERT_TRUE(h.canSend());
  std::memset(h.sendSlot(), marker, kSlotBytes);
  h.commitSend(kSlotBytes);
}

uint8_t receiveMarker(ConnectorMemory& m) {
  FifoHandle h{m.header(), m.data(), kSlots, 0, kSlotBytes};
  if (!h.canRecv()) return 0;
  return static_cast<uint8_t>(h.recvSlot()[kSlotBytes - 1]);
}

// `sender` and `receiver` are the factories of the two ends (one factory per rank).
void expectPairingRule(ConnectorFactory& sender, ConnectorFactory& receiver) {
  const ConnectorKey key{0x51, 0, 1, 0};
  // The sender sends and lets go before the receiver has attached at all.
  sendMarker(*attach(sender, key, ConnectorEnd::Sender), 0xA1);
  // It registers the collId twice more meanwhile: generations 2 and 3 of the key.
  auto second = attach(sender, key, ConnectorEnd::Sender);
  sendMarker(*second, 0xA2);
  auto third = attach(sender, key, ConnectorEnd::Sender);
  sendMarker(*third, 0xA3);
  second.reset();
  // The receiver's registrations meet them in order, each with its own payload.
  EXPECT_EQ(receiveMarker(*attach(receiver, key, ConnectorEnd::Receiver)), 0xA1);
  EXPECT_EQ(receiveMarker(*attach(receiver, key, ConnectorEnd::Receiver)), 0xA2);
  EXPECT_EQ(receiveMarker(*attach(receiver, key, ConnectorEnd::Receiver)), 0xA3);
  // The receiver now comes first: its fourth attach waits for the sender's fourth.
  auto fourth = attach(receiver, key, ConnectorEnd::Receiver);
  EXPECT_EQ(receiveMarker(*fourth), 0);
  sendMarker(*attach(sender, key, ConnectorEnd::Sender), 0xA4);
  EXPECT_EQ(receiveMarker(*fourth), 0xA4);
  // Another channel of the same collective is another connector.
  EXPECT_EQ(receiveMarker(*attach(receiver, ConnectorKey{0x51, 0, 1, 1}, ConnectorEnd::Receiver)), 0);
}

TEST(ConnectorPairing, InProcess) {
  auto world = transport::makeInProcessWorld();
  auto a = transport::makeInProcessFactory(world), b = transport::makeInProcessFactory(world);
  expectPairingRule(*a, *b);
}

TEST(ConnectorPairing, SharedMemoryLeavesNothingBehind) {
  if (!std::filesystem::exists("/dev/shm")) GTEST_SKIP() << "no /dev/shm on this machine";
  const uint64_t nonce = std::random_device{}() | (uint64_t{std::random_device{}()} << 32);
  {
    // Two factories stand for two processes: they share nothing but the shm names.
    auto a = transport::makeShmFactory(nonce, 5000, transport::ShmRanges::Packed);
    auto b = transport::makeShmFactory(nonce, 5000, transport::ShmRanges::Packed);
    expectPairingRule(*a, *b);
    auto unjoined = attach(*a, ConnectorKey{0x52, 0, 1, 0}, ConnectorEnd::Sender);
    EXPECT_EQ(jobShmNames(nonce).size(), 2u) << "the job's pool and its arena (the unjoined ranges are in it)";
  }
  EXPECT_TRUE(jobShmNames(nonce).empty()) << "segments left in /dev/shm: " << jobShmNames(nonce).front();
}

// Ends that disagree on the geometry (which the collective decides as much as the configuration):
// the second's attach fails naming the settings, and the first's connector is poisoned, so that a
// collective waiting on it fails instead of waiting. `slots` x `slotBytes` is the second's geometry.
void expectMismatchPoisonsTheFirstEnd(ConnectorFactory& first, ConnectorFactory& second, uint32_t slots,
                                      uint64_t slotBytes) {
  const ConnectorKey key{0x53, 0, 1, 0};
  auto sender = attach(first, key, ConnectorEnd::Sender);
  auto other = second.attach(key, ConnectorEnd::Receiver, slots, slotBytes);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code, occlInvalidUsage);
  EXPECT_NE(other.status().message.find("connectorSlotBytes"), std::string::npos) << other.status().message;
  EXPECT_EQ(atomics::loadAcquire(&sender->header()->poison), static_cast<uint32_t>(occlInvalidUsage));
}

TEST(ConnectorPairing, InProcessAGeometryMismatchPoisonsTheFirstEnd) {
  auto world = transport::makeInProcessWorld();
  auto a = transport::makeInProcessFactory(world), b = transport::makeInProcessFactory(world);
  expectMismatchPoisonsTheFirstEnd(*a, *b, kSlots, 2 * kSlotBytes);
}

// Another size (the pool's check), and the same pages split otherwise (claimGeometry's).
TEST(ConnectorPairing, SharedMemoryAGeometryMismatchPoisonsTheFirstEnd) {
  if (!std::filesystem::exists("/dev/shm")) GTEST_SKIP() << "no /dev/shm on this machine";
  for (const auto& [slots, slotBytes] : {std::pair<uint32_t, uint64_t>{kSlots, 2 * kSlotBytes}, {2 * kSlots, kSlotBytes / 2}}) {
    const uint64_t nonce = std::random_device{}() | (uint64_t{std::random_device{}()} << 32);
    auto a = transport::makeShmFactory(nonce, 5000, transport::ShmRanges::Packed);
    auto b = transport::makeShmFactory(nonce, 5000, transport::ShmRanges::Packed);
    expectMismatchPoisonsTheFirstEnd(*a, *b, slots, slotBytes);
  }
}

// A small connector packed at one end and in whole pages at the other (a CUDA rank among host
// ranks, had shmRangesFor not made all of them take whole pages): the second end's attach fails
// naming the backend, and the first end's connector is poisoned.
TEST(ConnectorPairing, SharedMemoryPackedAndWholePageEndsFailTheRegistration) {
  if (!std::filesystem::exists("/dev/shm")) GTEST_SKIP() << "no /dev/shm on this machine";
  const uint64_t nonce = std::random_device{}() | (uint64_t{std::random_device{}()} << 32);
  auto packed = transport::makeShmFactory(nonce, 5000, transport::ShmRanges::Packed);
  auto whole = transport::makeShmFactory(nonce, 5000, transport::ShmRanges::WholePages);
  constexpr uint32_t kSmallSlots = 2;
  constexpr uint64_t kSmallSlotBytes = 64;  // 576 bytes: 1 KiB packed, a page otherwise
  const ConnectorKey key{0x54, 0, 1, 0};
  auto sender = packed->attach(key, ConnectorEnd::Sender, kSmallSlots, kSmallSlotBytes);
  ASSERT_TRUE(sender.ok()) << sender.status().message;
  auto receiver = whole->attach(key, ConnectorEnd::Receiver, kSmallSlots, kSmallSlotBytes);
  ASSERT_FALSE(receiver.ok());
  EXPECT_EQ(receiver.status().code, occlInvalidUsage);
  EXPECT_NE(receiver.status().message.find("backend"), std::string::npos) << receiver.status().message;
  EXPECT_EQ(atomics::loadAcquire(&sender.value()->header()->poison), static_cast<uint32_t>(occlInvalidUsage));
}

size_t mappingsOfThisProcess() {
  std::ifstream maps("/proc/self/maps");
  size_t n = 0;
  for (std::string line; std::getline(maps, line);) ++n;
  return n;
}

// A process maps the job's pool and its arena once, however many connectors it holds: with a
// segment per connector, two processes ran out of mappings (vm.max_map_count, 65,530) at their
// 32,682nd AllReduce.
TEST(ConnectorPairing, SharedMemoryConnectorsTakeAFewMappings) {
  if (!std::filesystem::exists("/dev/shm")) GTEST_SKIP() << "no /dev/shm on this machine";
  const uint64_t nonce = std::random_device{}() | (uint64_t{std::random_device{}()} << 32);
  auto a = transport::makeShmFactory(nonce, 5000, transport::ShmRanges::Packed);
  auto b = transport::makeShmFactory(nonce, 5000, transport::ShmRanges::Packed);
  constexpr uint64_t kConnectors = 2000;
  std::vector<std::shared_ptr<ConnectorMemory>> held;
  const size_t before = mappingsOfThisProcess();
  for (uint64_t id = 0; id < kConnectors; ++id) {
    held.push_back(attach(*a, ConnectorKey{0x1000 + id, 0, 1, 0}, ConnectorEnd::Sender));
    held.push_back(attach(*b, ConnectorKey{0x1000 + id, 0, 1, 0}, ConnectorEnd::Receiver));
  }
  // The pool and an arena for each factory; the rest is the heap's (and a sanitizer's shadow).
  EXPECT_LT(mappingsOfThisProcess(), before + kConnectors / 10) << held.size() << " connectors";
}

// Through the API: rank 0 sends, completes and deregisters before rank 1 registers the receive,
// then sends again under the same collId; rank 1's two registrations get the two payloads.
TEST(ConnectorPairing, SenderDeregistersBeforeReceiverRegisters) {
  CommGroup comms(2);
  constexpr uint64_t kId = 0x77;
  constexpr size_t kCount = 64;  // fits one connector slot: the send completes on its own
  occlCollDesc_t send, recv;
  occlCollDescInit(&send);
  occlCollDescInit(&recv);
  send.type = occlCollSend;
  recv.type = occlCollRecv;
  send.count = recv.count = kCount;
  send.datatype = recv.datatype = occlFloat32;
  send.root = 1;  // Send/Recv name the peer in `root`
  recv.root = 0;
  std::vector<float> payload[2] = {std::vector<float>(kCount, 1.5f), std::vector<float>(kCount, -2.25f)};
  for (const std::vector<float>& p : payload) {
    CallbackCounter sent;
    expectOk(occlCollRegister(comms[0], kId, &send), comms[0], "register send");
    expectOk(occlSubmit(comms[0], kId, p.data(), nullptr, &CallbackCounter::callback, sent.arg()), comms[0], "submit");
    ASSERT_TRUE(sent.waitFor(1, std::chrono::seconds(20)));
    EXPECT_EQ(sent.fired().front().second, occlSuccess);
    expectOk(occlCollDeregister(comms[0], kId), comms[0], "deregister send");
  }
  for (const std::vector<float>& p : payload) {
    CallbackCounter received;
    std::vector<float> out(kCount, 0.0f);
    expectOk(occlCollRegister(comms[1], kId, &recv), comms[1], "register recv");
    expectOk(occlSubmit(comms[1], kId, nullptr, out.data(), &CallbackCounter::callback, received.arg()), comms[1],
             "submit");
    ASSERT_TRUE(received.waitFor(1, std::chrono::seconds(20))) << "the receive never saw the data sent";
    EXPECT_EQ(received.fired().front().second, occlSuccess);
    EXPECT_EQ(out, p);
    expectOk(occlCollDeregister(comms[1], kId), comms[1], "deregister recv");
  }
}

// ---- populate ----

// Whether this process maps the page holding `p` (/proc/self/pagemap: bit 63, page present).
bool mapped(const void* p) {
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const int fd = open("/proc/self/pagemap", O_RDONLY);
  uint64_t entry = 0;
  const off_t at = static_cast<off_t>(reinterpret_cast<uintptr_t>(p) / page * sizeof entry);
  const bool read = fd >= 0 && pread(fd, &entry, sizeof entry, at) == static_cast<ssize_t>(sizeof entry);
  if (fd >= 0) close(fd);
  if (!read) throw std::runtime_error(std::string("cannot read /proc/self/pagemap: ") + std::strerror(errno));
  return (entry >> 63) != 0;
}

constexpr uint32_t kPopSlots = 4;
constexpr uint64_t kPopSlotBytes = uint64_t{1} << 20;
constexpr uint64_t kTileBytes = 5000;  // a tile's bytes: two pages of each slot

std::shared_ptr<ConnectorMemory> attachBig(ConnectorFactory& f, const ConnectorKey& key, ConnectorEnd end) {
  auto mem = f.attach(key, end, kPopSlots, kPopSlotBytes);
  if (!mem.ok()) throw std::runtime_error(mem.status().message);
  return mem.value();
}

// The first kTileBytes of every slot and the slot lengths are mapped (or not); the middle of a
// slot, which no tile of that size reaches, never is. Slot 0 starts on the header's page, which
// attach itself writes.
void expectTilesMapped(const ConnectorMemory& m, bool expected) {
  for (uint32_t s = 0; s < kPopSlots; ++s) {
    const char* slot = m.data() + s * kPopSlotBytes;
    if (s > 0) {
      EXPECT_EQ(mapped(slot), expected) << "slot " << s << ": its first byte";
    }
    EXPECT_EQ(mapped(slot + kTileBytes - 1), expected) << "slot " << s << ": the tile's last byte";
    EXPECT_FALSE(mapped(slot + kPopSlotBytes / 2)) << "slot " << s << ": its middle";
  }
  EXPECT_EQ(mapped(m.data() + fifoLengthsOffset(kPopSlots, kPopSlotBytes)), expected) << "the slot lengths";
}

// Threads share one mapping and its page tables: the sender maps in what it will fill; the
// receiver, whose touch could meet the sender's daemon already writing, touches nothing.
TEST(ConnectorPopulate, InProcessTheSenderMapsTheTilesInOnce) {
  auto world = transport::makeInProcessWorld();
  auto a = transport::makeInProcessFactory(world), b = transport::makeInProcessFactory(world);
  const ConnectorKey key{0x61, 0, 1, 0};
  auto sender = attachBig(*a, key, ConnectorEnd::Sender);
  auto receiver = attachBig(*b, key, ConnectorEnd::Receiver);
  ASSERT_EQ(sender->data(), receiver->data());
  expectTilesMapped(*sender, false);
  ASSERT_TRUE(receiver->populate(ConnectorEnd::Receiver, kPopSlots, kPopSlotBytes, kTileBytes).ok());
  expectTilesMapped(*sender, false);
  ASSERT_TRUE(sender->populate(ConnectorEnd::Sender, kPopSlots, kPopSlotBytes, kTileBytes).ok());
  expectTilesMapped(*sender, true);
  for (uint64_t i = 0; i < kTileBytes; ++i) ASSERT_EQ(sender->data()[kPopSlotBytes + i], 0) << i;
}

// Two factories stand for two processes with a mapping each: each end maps in its own, and the
// receiver's touches leave what the sender already wrote (a peer may be that far ahead).
TEST(ConnectorPopulate, SharedMemoryEachEndMapsItsOwnAndTheDataStays) {
  if (!std::filesystem::exists("/dev/shm")) GTEST_SKIP() << "no /dev/shm on this machine";
  const uint64_t nonce = std::random_device{}() | (uint64_t{std::random_device{}()} << 32);
  auto a = transport::makeShmFactory(nonce, 5000, transport::ShmRanges::Packed);
  auto b = transport::makeShmFactory(nonce, 5000, transport::ShmRanges::Packed);
  const ConnectorKey key{0x62, 0, 1, 0};
  auto sender = attachBig(*a, key, ConnectorEnd::Sender);
  ASSERT_TRUE(sender->populate(ConnectorEnd::Sender, kPopSlots, kPopSlotBytes, kTileBytes).ok());
  expectTilesMapped(*sender, true);
  for (uint32_t s = 0; s < kPopSlots; ++s) std::memset(sender->data() + s * kPopSlotBytes, 0x50 + s, kTileBytes);
  auto receiver = attachBig(*b, key, ConnectorEnd::Receiver);
  ASSERT_NE(sender->data(), receiver->data());
  expectTilesMapped(*receiver, false);
  ASSERT_TRUE(receiver->populate(ConnectorEnd::Receiver, kPopSlots, kPopSlotBytes, kTileBytes).ok());
  expectTilesMapped(*receiver, true);
  for (uint32_t s = 0; s < kPopSlots; ++s)
    for (uint64_t i = 0; i < kTileBytes; ++i)
      ASSERT_EQ(receiver->data()[s * kPopSlotBytes + i], static_cast<char>(0x50 + s)) << "slot " << s << ", byte " << i;
  // The sender registering again over what it wrote (a second form, say) keeps it too.
  ASSERT_TRUE(sender->populate(ConnectorEnd::Sender, kPopSlots, kPopSlotBytes, kTileBytes).ok());
  EXPECT_EQ(sender->data()[kPopSlotBytes + kTileBytes - 1], 0x51);
}

}  // namespace
}  // namespace occl::test
