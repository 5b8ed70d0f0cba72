// The NET connector (transport/net): ranks as threads of this process, each with its own
// NetFactory (UCX worker and proxy thread) over UCX's tcp transport, addresses exchanged directly.
// The test threads play the daemon: they use the local FIFOs through FifoHandle only.
// One test SIGKILLs a child process that is this binary re-executed (see childMain below).
// Under ThreadSanitizer run it with UCX_MEM_EVENTS=no: UCX's malloc/mmap hooks and TSan's
// interceptors crash each other (the connector registers no memory, so it needs no events).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "transport/net/connectors.hpp"

namespace occl::test {
namespace {

using transport::ConnectorEnd;
using transport::ConnectorKey;
using transport::ConnectorMemory;
using transport::net::makeNetFactory;
using transport::net::NetFactory;
using transport::net::NetOptions;
using Clock = std::chrono::steady_clock;

constexpr auto kWait = std::chrono::seconds(20);  // any single wait of these tests

NetOptions optionsFor(int rank, int nRanks) {
  NetOptions o;
  o.rank = rank;
  o.nRanks = nRanks;
  o.tls = "tcp";  // no RDMA hardware, and no shared memory between these "hosts"
  return o;
}

// True once `pred` holds, false after `limit`.
bool waitFor(const std::function<bool()>& pred, std::chrono::milliseconds limit = kWait) {
  auto deadline = Clock::now() + limit;
  while (!pred()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

// `n` ranks, every pair connected.
struct NetRanks {
  std::vector<std::unique_ptr<NetFactory>> f;
  explicit NetRanks(int n) {
    std::vector<std::vector<uint8_t>> addresses;
    for (int r = 0; r < n; ++r) {
      auto made = makeNetFactory(optionsFor(r, n));
      if (!made.ok()) throw std::runtime_error(made.status().message);
      addresses.push_back(made.value()->localAddress());
      f.push_back(std::move(made.value()));
    }
    for (int r = 0; r < n; ++r) {
      occl::Status s = f[r]->connect(addresses);
      if (!s.ok()) throw std::runtime_error(s.message);
    }
  }
  NetFactory& operator[](int r) { return *f[r]; }
};

struct Fifo {
  std::shared_ptr<ConnectorMemory> mem;
  uint32_t nSlots;
  uint64_t slotBytes;
  FifoHandle h() const { return FifoHandle{mem->header(), mem->data(), nSlots, 0, slotBytes}; }
  uint32_t poison() const { return h().poisonStatus(); }
};

Fifo attach(NetFactory& f, const ConnectorKey& key, ConnectorEnd end, uint32_t nSlots, uint64_t slotBytes) {
  auto m = f.attach(key, end, nSlots, slotBytes);
  if (!m.ok()) throw std::runtime_error(m.status().message);
  return Fifo{m.value(), nSlots, slotBytes};
}

// The byte at offset i of step `step`'s payload for stream `stream`.
uint8_t pattern(uint64_t stream, uint64_t step, uint64_t i) {
  uint64_t x = (stream * 0x9E3779B97F4A7C15ull) ^ (step * 0xBF58476D1CE4E5B9ull) ^ (i * 0x94D049BB133111EBull);
  x ^= x >> 31;
  return static_cast<uint8_t>(x ^ (x >> 17));
}

// How much of its slot step `step` fills: the whole slot every third step, else 1..slotBytes
// bytes, so partial slots (the proxy ships only the filled part) and full ones both cross.
uint64_t payloadBytes(uint64_t stream, uint64_t step, uint64_t slotBytes) {
  if (step % 3 == 0) return slotBytes;
  return 1 + (step * 7919 + stream * 104729) % slotBytes;
}

// The stamp step `step` carries (queues/fifo.hpp: a variable count's), so that the proxy is seen
// to ship it with the slot.
uint64_t stampOf(uint64_t stream, uint64_t step) { return countStamp(step * 31 + stream); }

// Sends steps [from, to) through `f` as a daemon block would; false on poison or timeout.
bool sendSteps(const Fifo& f, uint64_t stream, uint64_t from, uint64_t to) {
  FifoHandle h = f.h();
  for (uint64_t s = from; s < to; ++s) {
    if (!waitFor([&] { return h.canSend() || h.poisonStatus() != 0; })) return false;
    if (h.poisonStatus() != 0) return false;
    char* slot = h.sendSlot();
    const uint64_t bytes = payloadBytes(stream, s, f.slotBytes);
    for (uint64_t i = 0; i < bytes; ++i) slot[i] = static_cast<char>(pattern(stream, s, i));
    h.commitSend(bytes, stampOf(stream, s));
  }
  return true;
}

// Receives steps [from, to) and counts bytes that differ from what sendSteps wrote.
bool recvSteps(const Fifo& f, uint64_t stream, uint64_t from, uint64_t to, uint64_t& wrongBytes) {
  FifoHandle h = f.h();
  for (uint64_t s = from; s < to; ++s) {
    if (!waitFor([&] { return h.canRecv() || h.poisonStatus() != 0; })) return false;
    if (h.poisonStatus() != 0) return false;
    const char* slot = h.recvSlot();
    const uint64_t bytes = payloadBytes(stream, s, f.slotBytes);
    if (atomics::loadRelaxed(h.slotLength(s)) != bytes) wrongBytes += 1;  // the length crossed too
    if (h.recvStamp() != stampOf(stream, s)) wrongBytes += 1;              // and the stamp
    for (uint64_t i = 0; i < bytes; ++i) wrongBytes += static_cast<uint8_t>(slot[i]) != pattern(stream, s, i);
    h.commitRecv();
  }
  return true;
}

// The first byte of the slot step `step` of a receiver FIFO, once that step arrived; -1 if never.
int firstByteOf(const Fifo& f, uint64_t step) {
  FifoHandle h = f.h();
  if (!waitFor([&] { return atomics::loadAcquire(&h.header->tail) > step; }, std::chrono::seconds(10))) return -1;
  return static_cast<uint8_t>(h.data[(step % f.nSlots) * f.slotBytes]);
}

void sendMarker(const Fifo& f, uint8_t marker) {
  FifoHandle h = f.h();
  ASSERT_TRUE(h.canSend());
  std::memset(h.sendSlot(), marker, f.slotBytes);
  h.commitSend(f.slotBytes);
}

struct StreamCase {
  uint32_t nSlots;
  uint64_t slotBytes;
  uint64_t steps;
};

class NetStream : public ::testing::TestWithParam<StreamCase> {};

// Many laps of a small FIFO, both directions at once, eager-sized and rendezvous-sized slots.
TEST_P(NetStream, BytesArriveBitExactThroughManyLaps) {
  const StreamCase c = GetParam();
  NetRanks ranks(2);
  const ConnectorKey there{0x10, 0, 1, 0}, back{0x10, 1, 0, 0};
  Fifo s01 = attach(ranks[0], there, ConnectorEnd::Sender, c.nSlots, c.slotBytes);
  Fifo r01 = attach(ranks[1], there, ConnectorEnd::Receiver, c.nSlots, c.slotBytes);
  Fifo s10 = attach(ranks[1], back, ConnectorEnd::Sender, c.nSlots, c.slotBytes);
  Fifo r10 = attach(ranks[0], back, ConnectorEnd::Receiver, c.nSlots, c.slotBytes);
  std::atomic<bool> ok[4] = {false, false, false, false};
  uint64_t wrong[2] = {0, 0};
  std::vector<std::thread> threads;
  threads.emplace_back([&] { ok[0] = sendSteps(s01, 1, 0, c.steps); });
  threads.emplace_back([&] { ok[1] = recvSteps(r01, 1, 0, c.steps, wrong[0]); });
  threads.emplace_back([&] { ok[2] = sendSteps(s10, 2, 0, c.steps); });
  threads.emplace_back([&] { ok[3] = recvSteps(r10, 2, 0, c.steps, wrong[1]); });
  for (auto& t : threads) t.join();
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(ok[i]) << "thread " << i << " timed out or saw poison";
  EXPECT_EQ(wrong[0], 0u);
  EXPECT_EQ(wrong[1], 0u);
  // Every slot was credited back: the senders' heads reach their tails.
  EXPECT_TRUE(waitFor([&] { return atomics::loadAcquire(&s01.mem->header()->head) == c.steps; }));
  EXPECT_TRUE(waitFor([&] { return atomics::loadAcquire(&s10.mem->header()->head) == c.steps; }));
  EXPECT_EQ(s01.poison(), 0u);
  EXPECT_EQ(r10.poison(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Sizes, NetStream,
                         ::testing::Values(StreamCase{2, 64, 2000}, StreamCase{3, 4096, 600},
                                           StreamCase{4, 256 * 1024, 60}, StreamCase{2, 4 << 20, 8}),
                         [](const auto& info) {
                           return std::to_string(info.param.nSlots) + "x" + std::to_string(info.param.slotBytes);
                         });

// Memory from the allocator need not be zeroed (a CUDA daemon's pinned FIFOs are recycled), and
// a slot's line whose flag is left from an earlier FIFO would pass as this one's message
// (queues/fifo.hpp). Here every word of new memory reads 1, the flag of step 0: the proxy clears
// the lines, so the receiver waits for the real step 0, which crosses intact.
TEST(NetConnector, LinesOfRecycledMemoryAreClearedBeforeUse) {
  std::vector<std::unique_ptr<NetFactory>> f;
  std::vector<std::vector<uint8_t>> addresses;
  for (int r = 0; r < 2; ++r) {
    NetOptions o = optionsFor(r, 2);
    const transport::HostAllocator plain = o.allocator;
    o.allocator.allocate = [plain](size_t bytes) {
      void* p = plain.allocate(bytes);
      if (p != nullptr) std::fill_n(static_cast<uint64_t*>(p), bytes / sizeof(uint64_t), uint64_t{1});
      return p;
    };
    auto made = makeNetFactory(o);
    ASSERT_TRUE(made.ok()) << made.status().message;
    addresses.push_back(made.value()->localAddress());
    f.push_back(std::move(made.value()));
  }
  for (auto& factory : f) ASSERT_TRUE(factory->connect(addresses).ok());
  const ConnectorKey key{0x30, 0, 1, 0};
  Fifo r01 = attach(*f[1], key, ConnectorEnd::Receiver, 2, 64);
  EXPECT_FALSE(r01.h().canRecv()) << "a stale line passed as step 0 before anything was sent";
  Fifo s01 = attach(*f[0], key, ConnectorEnd::Sender, 2, 64);
  uint64_t wrong = 0;
  std::atomic<bool> sent{false};
  std::thread sender([&] { sent = sendSteps(s01, 3, 0, 40); });
  const bool received = recvSteps(r01, 3, 0, 40, wrong);
  sender.join();
  EXPECT_TRUE(sent && received) << "timed out or saw poison";
  EXPECT_EQ(wrong, 0u);
}

// transport/connector.hpp's pairing rule across ranks: a sender that sends, releases and attaches
// again before its receiver ever attached loses nothing; generations meet in order; a receiver
// that comes first gets the data of the sender's matching generation.
TEST(NetConnector, PairingRuleReceiverLateAndGenerations) {
  NetRanks ranks(2);
  const ConnectorKey key{0x51, 0, 1, 0};
  constexpr uint32_t kSlots = 2;
  constexpr uint64_t kBytes = 4096;
  {
    Fifo first = attach(ranks[0], key, ConnectorEnd::Sender, kSlots, kBytes);
    sendMarker(first, 0xA1);
    sendMarker(first, 0xB1);  // the whole FIFO
    EXPECT_FALSE(first.h().canSend());
  }  // released before the receiver attached
  Fifo second = attach(ranks[0], key, ConnectorEnd::Sender, kSlots, kBytes);
  sendMarker(second, 0xA2);
  Fifo third = attach(ranks[0], key, ConnectorEnd::Sender, kSlots, kBytes);
  sendMarker(third, 0xA3);
  second = Fifo{};
  // Large slots too: rendezvous data to a receiver that has not attached.
  Fifo big = attach(ranks[0], ConnectorKey{0x52, 0, 1, 0}, ConnectorEnd::Sender, 2, 1 << 20);
  sendMarker(big, 0xC1);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let it all land unclaimed

  Fifo r1 = attach(ranks[1], key, ConnectorEnd::Receiver, kSlots, kBytes);
  EXPECT_EQ(firstByteOf(r1, 0), 0xA1);
  EXPECT_EQ(firstByteOf(r1, 1), 0xB1);
  EXPECT_EQ(firstByteOf(attach(ranks[1], key, ConnectorEnd::Receiver, kSlots, kBytes), 0), 0xA2);
  EXPECT_EQ(firstByteOf(attach(ranks[1], key, ConnectorEnd::Receiver, kSlots, kBytes), 0), 0xA3);
  EXPECT_EQ(firstByteOf(attach(ranks[1], ConnectorKey{0x52, 0, 1, 0}, ConnectorEnd::Receiver, 2, 1 << 20), 0), 0xC1);
  // Consuming generation 0 credits its released sender: nothing breaks, nothing is poisoned.
  r1.h().commitRecv();
  r1.h().commitRecv();
  // The receiver now comes first: its fourth attach gets the sender's fourth, not the third.
  Fifo fourth = attach(ranks[1], key, ConnectorEnd::Receiver, kSlots, kBytes);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(fourth.h().canRecv());
  sendMarker(attach(ranks[0], key, ConnectorEnd::Sender, kSlots, kBytes), 0xA4);
  EXPECT_EQ(firstByteOf(fourth, 0), 0xA4);
  // Another channel of the same collective is another connector.
  Fifo other = attach(ranks[1], ConnectorKey{0x51, 0, 1, 1}, ConnectorEnd::Receiver, kSlots, kBytes);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(other.h().canRecv());
  EXPECT_EQ(r1.poison(), 0u);
  EXPECT_EQ(fourth.poison(), 0u);
}

// Several generations of one key used one after another, each a multi-lap stream, with the
// receiver running behind: each generation's data stays in its own generation.
TEST(NetConnector, GenerationsOfOneKeyStreamInOrder) {
  NetRanks ranks(2);
  const ConnectorKey key{0x60, 1, 0, 2, 1};
  constexpr int kGenerations = 5;
  constexpr uint64_t kSteps = 40;
  std::atomic<int> sendersOk{0};
  std::thread sender([&] {
    for (int g = 0; g < kGenerations; ++g) {
      Fifo s = attach(ranks[1], key, ConnectorEnd::Sender, 2, 8192);
      if (sendSteps(s, 100 + g, 0, kSteps)) ++sendersOk;
    }
  });
  uint64_t wrong = 0;
  int receiversOk = 0;
  for (int g = 0; g < kGenerations; ++g) {
    Fifo r = attach(ranks[0], key, ConnectorEnd::Receiver, 2, 8192);
    if (recvSteps(r, 100 + g, 0, kSteps, wrong)) ++receiversOk;
  }
  sender.join();
  EXPECT_EQ(sendersOk.load(), kGenerations);
  EXPECT_EQ(receiversOk, kGenerations);
  EXPECT_EQ(wrong, 0u);
}

// A geometry that differs between the ends fails the later attach at once (when the earlier
// end's geometry already arrived) or poisons it; the earlier end is poisoned in every case.
void expectInvalidUsage(NetFactory& f, const ConnectorKey& key, ConnectorEnd end, uint32_t slots, uint64_t bytes,
                        std::vector<Fifo>& keep) {
  auto m = f.attach(key, end, slots, bytes);
  if (!m.ok()) {
    EXPECT_EQ(m.status().code, occlInvalidUsage) << m.status().message;
    EXPECT_NE(m.status().message.find("connectorSlots"), std::string::npos) << m.status().message;
    return;
  }
  Fifo fifo{m.value(), slots, bytes};
  EXPECT_TRUE(waitFor([&] { return fifo.poison() != 0; })) << "a mismatched end was neither refused nor poisoned";
  EXPECT_EQ(fifo.poison(), static_cast<uint32_t>(occlInvalidUsage));
  keep.push_back(fifo);
}

TEST(NetConnector, GeometryMismatchFailsBothEnds) {
  NetRanks ranks(2);
  std::vector<Fifo> keep;
  for (bool senderFirst : {true, false}) {
    for (bool settle : {false, true}) {
      const ConnectorKey key{0x70 + uint64_t{senderFirst} * 2 + settle, 0, 1, 0};
      NetFactory& first = senderFirst ? ranks[0] : ranks[1];
      NetFactory& second = senderFirst ? ranks[1] : ranks[0];
      ConnectorEnd firstEnd = senderFirst ? ConnectorEnd::Sender : ConnectorEnd::Receiver;
      ConnectorEnd secondEnd = senderFirst ? ConnectorEnd::Receiver : ConnectorEnd::Sender;
      Fifo early = attach(first, key, firstEnd, 2, 4096);
      if (senderFirst) sendMarker(early, 0x11);
      // With `settle`, the early end's geometry has arrived before the late end attaches.
      if (settle) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      expectInvalidUsage(second, key, secondEnd, 4, 4096, keep);
      EXPECT_TRUE(waitFor([&] { return early.poison() != 0; })) << "the earlier end was never told";
      EXPECT_EQ(early.poison(), static_cast<uint32_t>(occlInvalidUsage));
    }
  }
  // The generation that failed is spent: the next attaches pair and work.
  const ConnectorKey key{0x70, 0, 1, 0};
  Fifo s = attach(ranks[0], key, ConnectorEnd::Sender, 2, 4096);
  Fifo r = attach(ranks[1], key, ConnectorEnd::Receiver, 2, 4096);
  sendMarker(s, 0x22);
  EXPECT_EQ(firstByteOf(r, 0), 0x22);
  EXPECT_EQ(r.poison(), 0u);
}

TEST(NetConnector, SignatureExchangeAndMismatch) {
  NetRanks ranks(2);
  const ConnectorKey same{0x80, 0, 1, 0}, differ{0x81, 1, 0, 0};
  Fifo s = attach(ranks[0], same, ConnectorEnd::Sender, 2, 256);
  Fifo r = attach(ranks[1], same, ConnectorEnd::Receiver, 2, 256);
  auto first = s.mem->exchangeSignature(true, 0xABCDEF);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first.value(), 0u) << "the receiver has not registered yet";
  uint64_t seenBySender = 0, seenByReceiver = 0;
  EXPECT_TRUE(waitFor([&] {
    seenByReceiver = r.mem->exchangeSignature(false, 0xABCDEF).value();
    return seenByReceiver != 0;
  }));
  EXPECT_EQ(seenByReceiver, 0xABCDEFu);
  EXPECT_TRUE(waitFor([&] {
    seenBySender = s.mem->exchangeSignature(true, 0xABCDEF).value();
    return seenBySender != 0;
  }));
  EXPECT_EQ(seenBySender, 0xABCDEFu);
  EXPECT_FALSE(s.h().peerSignatureDiffers(0xABCDEF, true));

  // Registered differently: each end's daemon sees it in its own header.
  Fifo s2 = attach(ranks[1], differ, ConnectorEnd::Sender, 2, 256);
  Fifo r2 = attach(ranks[0], differ, ConnectorEnd::Receiver, 2, 256);
  ASSERT_TRUE(s2.mem->exchangeSignature(true, 0x1111).ok());
  ASSERT_TRUE(r2.mem->exchangeSignature(false, 0x2222).ok());
  EXPECT_TRUE(waitFor([&] { return s2.h().peerSignatureDiffers(0x1111, true); }));
  EXPECT_TRUE(waitFor([&] { return r2.h().peerSignatureDiffers(0x2222, false); }));
  // The wrong end's half of the handshake is a clear error, not a silent write.
  auto wrongEnd = s2.mem->exchangeSignature(false, 0x3333);
  ASSERT_FALSE(wrongEnd.ok());
  EXPECT_EQ(wrongEnd.status().code, occlInternalError);
}

TEST(NetConnector, PoisonForwardsBothWays) {
  NetRanks ranks(2);
  const ConnectorKey a{0x90, 0, 1, 0}, b{0x91, 0, 1, 0}, c{0x92, 1, 0, 0};
  Fifo sa = attach(ranks[0], a, ConnectorEnd::Sender, 2, 512);
  Fifo ra = attach(ranks[1], a, ConnectorEnd::Receiver, 2, 512);
  Fifo sb = attach(ranks[0], b, ConnectorEnd::Sender, 2, 512);
  Fifo rb = attach(ranks[1], b, ConnectorEnd::Receiver, 2, 512);
  Fifo sc = attach(ranks[1], c, ConnectorEnd::Sender, 2, 512);
  Fifo rc = attach(ranks[0], c, ConnectorEnd::Receiver, 2, 512);
  // The host's way (occlCommAbort): sender to receiver.
  ASSERT_TRUE(sa.mem->poison(occlTimeout, 7).ok());
  EXPECT_TRUE(waitFor([&] { return ra.poison() != 0; }));
  EXPECT_EQ(ra.poison(), static_cast<uint32_t>(occlTimeout));
  // With the first submission it fails: the receiver's earlier ones stand.
  EXPECT_FALSE(ra.h().poisonFails(6));
  EXPECT_TRUE(ra.h().poisonFails(7));
  // The daemon's way (FifoHandle::poisonWith, no doorbell): receiver to sender.
  rb.h().poisonWith(occlRemoteError, 3);
  EXPECT_TRUE(waitFor([&] { return sb.poison() != 0; }));
  EXPECT_EQ(sb.poison(), static_cast<uint32_t>(occlRemoteError));
  EXPECT_FALSE(sb.h().poisonFails(2));
  EXPECT_TRUE(sb.h().poisonFails(3));
  // The first status stays: once the sender's poison has arrived, the receiver's later one
  // neither replaces it there nor travels back to replace it at the sender.
  sc.h().poisonWith(occlInvalidUsage, 0);
  EXPECT_TRUE(waitFor([&] { return rc.poison() != 0; }));
  rc.h().poisonWith(occlSystemError, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(sc.poison(), static_cast<uint32_t>(occlInvalidUsage));
  EXPECT_EQ(rc.poison(), static_cast<uint32_t>(occlInvalidUsage));
  // Both ends poisoned at once: whichever status reaches an end first stays there, so each end
  // holds one of the two, and neither changes afterwards.
  const ConnectorKey e{0x95, 1, 0, 0};
  Fifo se = attach(ranks[1], e, ConnectorEnd::Sender, 2, 512);
  Fifo re = attach(ranks[0], e, ConnectorEnd::Receiver, 2, 512);
  se.h().poisonWith(occlInvalidUsage, 0);
  re.h().poisonWith(occlSystemError, 0);
  EXPECT_TRUE(waitFor([&] { return se.poison() != 0 && re.poison() != 0; }));
  const uint32_t settledSender = se.poison(), settledReceiver = re.poison();
  for (uint32_t got : {settledSender, settledReceiver})
    EXPECT_TRUE(got == static_cast<uint32_t>(occlInvalidUsage) || got == static_cast<uint32_t>(occlSystemError)) << got;
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(se.poison(), settledSender);
  EXPECT_EQ(re.poison(), settledReceiver);
  // A connector nobody poisoned stays clean.
  Fifo sd = attach(ranks[0], ConnectorKey{0x93, 0, 1, 0}, ConnectorEnd::Sender, 2, 512);
  Fifo rd = attach(ranks[1], ConnectorKey{0x93, 0, 1, 0}, ConnectorEnd::Receiver, 2, 512);
  sendMarker(sd, 0x5A);
  EXPECT_EQ(firstByteOf(rd, 0), 0x5A);
  EXPECT_EQ(rd.poison(), 0u);
}

// A slot length past the slot (a corrupted length word) is never shipped: the sending proxy
// poisons the connector with occlInternalError, and the poison reaches the receiver.
TEST(NetConnector, SlotLengthBeyondTheSlotPoisonsBothEnds) {
  NetRanks ranks(2);
  const ConnectorKey key{0x94, 0, 1, 0};
  Fifo s = attach(ranks[0], key, ConnectorEnd::Sender, 2, 512);
  Fifo r = attach(ranks[1], key, ConnectorEnd::Receiver, 2, 512);
  FifoHandle h = s.h();
  std::memset(h.sendSlot(), 0x33, s.slotBytes);
  h.commitSend(s.slotBytes + 1);
  EXPECT_TRUE(waitFor([&] { return s.poison() != 0 && r.poison() != 0; }));
  EXPECT_EQ(s.poison(), static_cast<uint32_t>(occlInternalError));
  EXPECT_EQ(r.poison(), static_cast<uint32_t>(occlInternalError));
  EXPECT_EQ(atomics::loadAcquire(&r.h().header->tail), 0u) << "the step must not arrive";
}

// A peer whose factory goes away (its process's NET state torn down) poisons every connector
// with it, on the surviving rank, with occlRemoteError; connectors with other peers go on.
TEST(NetConnector, PeerDestroyedPoisonsItsConnectorsOnly) {
  NetRanks ranks(3);
  const ConnectorKey to1{0xA0, 0, 1, 0}, from1{0xA0, 1, 0, 0}, to2{0xA1, 0, 2, 0}, pending{0xA2, 1, 0, 0};
  Fifo s01 = attach(ranks[0], to1, ConnectorEnd::Sender, 2, 4096);
  Fifo r01 = attach(ranks[1], to1, ConnectorEnd::Receiver, 2, 4096);
  Fifo r10 = attach(ranks[0], from1, ConnectorEnd::Receiver, 2, 4096);
  Fifo s10 = attach(ranks[1], from1, ConnectorEnd::Sender, 2, 4096);
  Fifo s02 = attach(ranks[0], to2, ConnectorEnd::Sender, 2, 4096);
  Fifo r02 = attach(ranks[2], to2, ConnectorEnd::Receiver, 2, 4096);
  Fifo waiting = attach(ranks[0], pending, ConnectorEnd::Receiver, 2, 4096);  // rank 1 never attaches it
  sendMarker(s01, 0x01);
  EXPECT_EQ(firstByteOf(r01, 0), 0x01);
  ranks.f[1].reset();  // while rank 1's own FIFOs are still held by its "daemon"
  for (Fifo* f : {&s01, &r10, &waiting}) {
    EXPECT_TRUE(waitFor([&] { return f->poison() != 0; })) << "a connector with the dead peer was never poisoned";
    EXPECT_EQ(f->poison(), static_cast<uint32_t>(occlRemoteError));
  }
  auto late = ranks[0].attach(ConnectorKey{0xA3, 0, 1, 0}, ConnectorEnd::Sender, 2, 4096);
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.status().code, occlRemoteError) << late.status().message;
  // Rank 1's orphaned handles stay valid memory; rank 2 is unaffected.
  sendMarker(s10, 0x10);
  sendMarker(s02, 0x02);
  EXPECT_EQ(firstByteOf(r02, 0), 0x02);
  EXPECT_EQ(s02.poison(), 0u);
  EXPECT_EQ(r02.poison(), 0u);
}

// Destroying factories while slots are in flight both ways neither hangs nor crashes; the
// survivor's connectors fail, and handles outlive their factory.
TEST(NetConnector, DestructionWithTrafficInFlight) {
  NetRanks ranks(2);
  const ConnectorKey there{0xB0, 0, 1, 0}, back{0xB0, 1, 0, 0};
  Fifo s01 = attach(ranks[0], there, ConnectorEnd::Sender, 4, 1 << 20);
  Fifo r01 = attach(ranks[1], there, ConnectorEnd::Receiver, 4, 1 << 20);
  Fifo s10 = attach(ranks[1], back, ConnectorEnd::Sender, 3, 8192);
  Fifo r10 = attach(ranks[0], back, ConnectorEnd::Receiver, 3, 8192);
  std::atomic<bool> stop{false};
  auto pump = [&](const Fifo& f, bool send) {
    FifoHandle h = f.h();
    while (!stop.load() && h.poisonStatus() == 0) {
      if (send && h.canSend()) {
        std::memset(h.sendSlot(), 0x77, 64);
        h.commitSend(64);
      } else if (!send && h.canRecv()) {
        h.commitRecv();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
  };
  std::vector<std::thread> threads;
  threads.emplace_back(pump, std::cref(s01), true);
  threads.emplace_back(pump, std::cref(r01), false);
  threads.emplace_back(pump, std::cref(s10), true);
  threads.emplace_back(pump, std::cref(r10), false);
  EXPECT_TRUE(waitFor([&] { return atomics::loadAcquire(&r01.mem->header()->head) > 8; })) << "no traffic flowed";
  ranks.f[0].reset();
  // Rank 0's own daemon would otherwise wait forever on FIFOs nobody mirrors any more.
  EXPECT_EQ(s01.poison(), static_cast<uint32_t>(occlRemoteError));
  EXPECT_EQ(r10.poison(), static_cast<uint32_t>(occlRemoteError));
  EXPECT_TRUE(waitFor([&] { return r01.poison() != 0 && s10.poison() != 0; }));
  EXPECT_EQ(r01.poison(), static_cast<uint32_t>(occlRemoteError));
  EXPECT_EQ(s10.poison(), static_cast<uint32_t>(occlRemoteError));
  ranks.f[1].reset();
  stop = true;
  for (auto& t : threads) t.join();
}

TEST(NetConnector, BadInputIsAClearError) {
  auto bad = makeNetFactory(optionsFor(3, 2));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code, occlInvalidArgument);
  NetOptions noAlloc = optionsFor(0, 2);
  noAlloc.allocator.release = nullptr;
  EXPECT_EQ(makeNetFactory(noAlloc).status().code, occlInvalidArgument);
  NetOptions badTls = optionsFor(0, 2);
  badTls.tls = "no-such-transport";
  auto unknown = makeNetFactory(badTls);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code, occlSystemError);
  EXPECT_NE(unknown.status().message.find("no-such-transport"), std::string::npos) << unknown.status().message;

  auto f0 = makeNetFactory(optionsFor(0, 3)), f1 = makeNetFactory(optionsFor(1, 3));
  ASSERT_TRUE(f0.ok() && f1.ok());
  NetFactory& a = *f0.value();
  const ConnectorKey key{0xC0, 0, 1, 0};
  EXPECT_EQ(a.attach(key, ConnectorEnd::Sender, 2, 64).status().code, occlInvalidUsage) << "before connect";
  EXPECT_EQ(a.connect({a.localAddress()}).code, occlInvalidArgument) << "one address for three ranks";
  EXPECT_EQ(a.connect({f1.value()->localAddress(), a.localAddress(), {}}).code, occlInvalidArgument)
      << "own entry is another worker";
  ASSERT_TRUE(a.connect({a.localAddress(), f1.value()->localAddress(), {}}).ok());
  EXPECT_EQ(a.connect({{}, f1.value()->localAddress(), {}}).code, occlInvalidUsage) << "connect twice";
  EXPECT_EQ(a.attach(key, ConnectorEnd::Receiver, 2, 64).status().code, occlInvalidArgument) << "not its end";
  EXPECT_EQ(a.attach(ConnectorKey{0xC0, 0, 0, 0}, ConnectorEnd::Sender, 2, 64).status().code, occlInvalidArgument)
      << "to itself";
  EXPECT_EQ(a.attach(ConnectorKey{0xC0, 0, 5, 0}, ConnectorEnd::Sender, 2, 64).status().code, occlInvalidArgument)
      << "no such rank";
  EXPECT_EQ(a.attach(ConnectorKey{0xC0, 0, 2, 0}, ConnectorEnd::Sender, 2, 64).status().code, occlInvalidUsage)
      << "rank 2 has no address";
  EXPECT_EQ(a.attach(key, ConnectorEnd::Sender, 0, 64).status().code, occlInvalidArgument) << "no slots";
  EXPECT_EQ(a.attach(key, ConnectorEnd::Sender, 2, 0).status().code, occlInvalidArgument) << "empty slots";
  f0.value().reset();  // before the rank it connected to, which never connected back
}

// The child process of PeerProcessKilled: rank 1 of 2. Reads rank 0's address from fd `in`,
// writes its own to fd `out`, sends one marker slot to rank 0 and waits to be killed.
[[noreturn]] void childMain(int in, int out) {
  alarm(120);  // never outlive a parent that failed to kill it
  auto f = makeNetFactory(optionsFor(1, 2));
  if (!f.ok()) _exit(3);
  const std::vector<uint8_t>& mine = f.value()->localAddress();
  uint32_t len = static_cast<uint32_t>(mine.size());
  if (write(out, &len, 4) != 4 || write(out, mine.data(), len) != static_cast<ssize_t>(len)) _exit(4);
  if (read(in, &len, 4) != 4) _exit(5);
  std::vector<uint8_t> theirs(len);
  for (size_t got = 0; got < len;) {
    ssize_t n = read(in, theirs.data() + got, len - got);
    if (n <= 0) _exit(6);
    got += static_cast<size_t>(n);
  }
  if (!f.value()->connect({theirs, {}}).ok()) _exit(7);
  Fifo s = attach(*f.value(), ConnectorKey{0xD0, 1, 0, 0}, ConnectorEnd::Sender, 2, 4096);
  Fifo r = attach(*f.value(), ConnectorKey{0xD0, 0, 1, 0}, ConnectorEnd::Receiver, 2, 4096);
  FifoHandle h = s.h();
  std::memset(h.sendSlot(), 0xD1, s.slotBytes);
  h.commitSend(s.slotBytes);
  for (;;) pause();
}

// Runs before main() in the re-executed child only.
const bool kIsChild = [] {
  const char* fds = std::getenv("OCCL_NET_TEST_CHILD_FDS");
  if (fds == nullptr) return false;
  int in = -1, out = -1;
  if (std::sscanf(fds, "%d,%d", &in, &out) != 2) _exit(2);
  childMain(in, out);
}();

TEST(NetConnector, PeerProcessKilledPoisonsWithRemoteError) {
  int toChild[2], fromChild[2];
  ASSERT_EQ(pipe(toChild), 0);
  ASSERT_EQ(pipe(fromChild), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(toChild[1]);
    close(fromChild[0]);
    std::string fds = std::to_string(toChild[0]) + "," + std::to_string(fromChild[1]);
    setenv("OCCL_NET_TEST_CHILD_FDS", fds.c_str(), 1);
    execl("/proc/self/exe", "net_connector_child", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(toChild[0]);
  close(fromChild[1]);
  struct Reaper {  // the child dies with the test, whatever fails
    pid_t pid;
    ~Reaper() {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  } reaper{pid};
  auto f = makeNetFactory(optionsFor(0, 2));
  ASSERT_TRUE(f.ok()) << f.status().message;
  uint32_t len = 0;
  ASSERT_EQ(read(fromChild[0], &len, 4), 4) << "the child died before it sent its address";
  std::vector<uint8_t> theirs(len);
  for (size_t got = 0; got < len;) {
    ssize_t n = read(fromChild[0], theirs.data() + got, len - got);
    ASSERT_GT(n, 0);
    got += static_cast<size_t>(n);
  }
  const std::vector<uint8_t>& mine = f.value()->localAddress();
  len = static_cast<uint32_t>(mine.size());
  ASSERT_EQ(write(toChild[1], &len, 4), 4);
  ASSERT_EQ(write(toChild[1], mine.data(), len), static_cast<ssize_t>(len));
  ASSERT_TRUE(f.value()->connect({{}, theirs}).ok());
  Fifo r = attach(*f.value(), ConnectorKey{0xD0, 1, 0, 0}, ConnectorEnd::Receiver, 2, 4096);
  Fifo s = attach(*f.value(), ConnectorKey{0xD0, 0, 1, 0}, ConnectorEnd::Sender, 2, 4096);
  ASSERT_EQ(firstByteOf(r, 0), 0xD1) << "nothing came from the child";
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  for (Fifo* fifo : {&r, &s}) {
    EXPECT_TRUE(waitFor([&] { return fifo->poison() != 0; })) << "the killed peer's connector was never poisoned";
    EXPECT_EQ(fifo->poison(), static_cast<uint32_t>(occlRemoteError));
  }
  close(toChild[1]);
  close(fromChild[0]);
}

}  // namespace
}  // namespace occl::test
