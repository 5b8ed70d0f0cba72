// Bad input gets a specific error code and a message that names the culprit; never a crash or a
// hang. Every check looks at both the code and a keyword of occlGetLastError.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "host/config.hpp"
#include "support/ranks.hpp"
#include "support/refusals.hpp"

namespace occl::test {
namespace {

occlCollDesc_t allReduce(size_t count) {
  occlCollDesc_t d;
  occlCollDescInit(&d);
  d.count = count;
  return d;
}

void registerBoth(CommGroup& comms, uint64_t collId, size_t count) {
  occlCollDesc_t d = allReduce(count);
  for (int r = 0; r < comms.size(); ++r) expectOk(occlCollRegister(comms[r], collId, &d), comms[r], "register");
}

TEST(BadInputTest, NullCommunicator) {
  float x = 0;
  occlCollDesc_t d = allReduce(1);
  EXPECT_OCCL_ERROR(occlSubmit(nullptr, 1, &x, &x, nullptr, nullptr), occlInvalidArgument, nullptr, "comm");
  EXPECT_OCCL_ERROR(occlCollRegister(nullptr, 1, &d), occlInvalidArgument, nullptr, "comm");
  EXPECT_OCCL_ERROR(occlCollDeregister(nullptr, 1), occlInvalidArgument, nullptr, "comm");
  EXPECT_OCCL_ERROR(occlCommWaitAll(nullptr, 0), occlInvalidArgument, nullptr, "comm");
  EXPECT_OCCL_ERROR(occlCommFinalize(nullptr), occlInvalidArgument, nullptr, "comm");
  EXPECT_OCCL_ERROR(occlCommAbort(nullptr), occlInvalidArgument, nullptr, "comm");
  EXPECT_OCCL_ERROR(occlCommDestroy(nullptr), occlInvalidArgument, nullptr, "comm");
  EXPECT_OCCL_ERROR(occlCommInitAll(nullptr, 2, nullptr, nullptr), occlInvalidArgument, nullptr, "comms");
  const char* t = nullptr;
  EXPECT_OCCL_ERROR(occlCommPeerTransport(nullptr, 0, &t), occlInvalidArgument, nullptr, "comm");
  occlUniqueId id{};
  EXPECT_OCCL_ERROR(occlCommInitRank(nullptr, 2, id, 0, nullptr), occlInvalidArgument, nullptr, "comm");
}

// Ranks that are threads of one process reach each other in-process; a peer outside the
// communicator is named in the error.
TEST(BadInputTest, PeerTransportOfThreadsAndOfNoRank) {
  CommGroup comms(2);
  for (int r = 0; r < 2; ++r) {
    for (int peer = 0; peer < 2; ++peer) {
      const char* t = nullptr;
      ASSERT_EQ(occlCommPeerTransport(comms[r], peer, &t), occlSuccess) << occlGetLastError(comms[r]);
      EXPECT_STREQ(t, "in-process");
    }
  }
  const char* t = nullptr;
  EXPECT_OCCL_ERROR(occlCommPeerTransport(comms[0], 2, &t), occlInvalidArgument, comms[0],
                    "peer 2 is not a rank of this 2-rank communicator (0..1)");
  EXPECT_OCCL_ERROR(occlCommPeerTransport(comms[0], -1, &t), occlInvalidArgument, comms[0], "peer -1");
}

// connectorSlotBytes = 0 is "auto": threads of one process take the one-host size; an explicit
// size is kept as given. occlCommGetConfig reports what the communicator runs with.
TEST(BadInputTest, GetConfigResolvesTheAutoSlotSize) {
  occlConfig_t defaults;
  ASSERT_EQ(occlConfigInit(&defaults), occlSuccess) << occlGetLastError(nullptr);
  if (defaults.connectorSlotBytes != 0) GTEST_SKIP() << "OCCL_CONN_SLOT_BYTES is set in this environment";
  {
    CommGroup comms(2);
    for (int r = 0; r < 2; ++r) {
      occlConfig_t c{};
      ASSERT_EQ(occlCommGetConfig(comms[r], &c), occlSuccess) << occlGetLastError(comms[r]);
      EXPECT_EQ(c.connectorSlotBytes, size_t{128} * 1024);
      EXPECT_EQ(c.collTimeoutMs, testConfig().collTimeoutMs);  // the rest as given
    }
  }
  occlConfig_t explicitSize = testConfig();
  explicitSize.connectorSlotBytes = 4096;
  CommGroup comms(1, explicitSize);
  occlConfig_t c{};
  ASSERT_EQ(occlCommGetConfig(comms[0], &c), occlSuccess) << occlGetLastError(comms[0]);
  EXPECT_EQ(c.connectorSlotBytes, 4096u);
  EXPECT_OCCL_ERROR(occlCommGetConfig(comms[0], nullptr), occlInvalidArgument, comms[0], "config is NULL");
  EXPECT_OCCL_ERROR(occlCommGetConfig(nullptr, &c), occlInvalidArgument, nullptr, "comm");
}

// The auto slot size of each kind of communicator (host/config.hpp); every rank of one decides
// alike, from facts all of them know. A size given is never changed.
TEST(BadInputTest, TheAutoSlotSizeGoesByHostsAndCudaRanks) {
  struct Case {
    bool spansHosts, anyCudaRank;
    size_t expected;
  };
  for (const Case& k : {Case{false, false, size_t{128} * 1024}, Case{true, false, size_t{1024} * 1024},
                        Case{false, true, size_t{1024} * 1024}, Case{true, true, size_t{1024} * 1024}}) {
    occlConfig_t c = testConfig();
    c.connectorSlotBytes = 0;
    host::resolveConnectorGeometry(c, k.spansHosts, k.anyCudaRank);
    EXPECT_EQ(c.connectorSlotBytes, k.expected) << "spans hosts " << k.spansHosts << ", CUDA rank " << k.anyCudaRank;
    c.connectorSlotBytes = 4096;
    host::resolveConnectorGeometry(c, k.spansHosts, k.anyCudaRank);
    EXPECT_EQ(c.connectorSlotBytes, 4096u);
  }
}

TEST(BadInputTest, NullOutputPointers) {
  CommGroup comms(1);
  occlComm_t c = comms[0];
  EXPECT_OCCL_ERROR(occlCollRegister(c, 1, nullptr), occlInvalidArgument, c, "desc");
  EXPECT_OCCL_ERROR(occlCommCount(c, nullptr), occlInvalidArgument, c, "count");
  EXPECT_OCCL_ERROR(occlCommUserRank(c, nullptr), occlInvalidArgument, c, "rank");
  EXPECT_OCCL_ERROR(occlCommPeerTransport(c, 0, nullptr), occlInvalidArgument, c, "transport");
  EXPECT_OCCL_ERROR(occlCommGetAsyncError(c, nullptr), occlInvalidArgument, c, "asyncError");
  EXPECT_OCCL_ERROR(occlCollGetStats(c, 1, nullptr), occlInvalidArgument, c, "stats");
  EXPECT_OCCL_ERROR(occlGetUniqueId(nullptr), occlInvalidArgument, nullptr, "uniqueId");
  EXPECT_OCCL_ERROR(occlConfigInit(nullptr), occlInvalidArgument, nullptr, "config");
  EXPECT_OCCL_ERROR(occlCollDescInit(nullptr), occlInvalidArgument, nullptr, "desc");
}

TEST(BadInputTest, NullBuffers) {
  CommGroup comms(1);
  occlComm_t c = comms[0];
  registerBoth(comms, 5, 16);
  float buf[16] = {};
  EXPECT_OCCL_ERROR(occlSubmit(c, 5, nullptr, buf, nullptr, nullptr), occlInvalidArgument, c, "sendbuf");
  EXPECT_OCCL_ERROR(occlSubmit(c, 5, buf, nullptr, nullptr, nullptr), occlInvalidArgument, c, "recvbuf");
  // A zero-element collective touches no memory: NULL is fine (as in NCCL).
  registerBoth(comms, 6, 0);
  CallbackCounter done;
  expectOk(occlSubmit(c, 6, nullptr, nullptr, &CallbackCounter::callback, done.arg()), c, "count-0 submit");
  ASSERT_TRUE(done.waitFor(1, std::chrono::seconds(10)));
  EXPECT_EQ(done.fired()[0].second, occlSuccess);
}

// desc.sharedBuffers = 1 takes occlMemAlloc memory only. A submission of the buffers that passed
// the last one skips the lookup while nothing was freed (Collective::BuffersSeen): a buffer
// freed since is still refused, and one allocated again passes.
TEST(BadInputTest, SharedBuffersFreedAfterASubmissionAreRefused) {
  CommGroup comms(1);
  occlComm_t c = comms[0];
  occlCollDesc_t d = allReduce(16);
  d.sharedBuffers = 1;
  expectOk(occlCollRegister(c, 7, &d), c, "register");
  void* in = nullptr;
  void* out = nullptr;
  ASSERT_EQ(occlMemAlloc(&in, 16 * sizeof(float)), occlSuccess) << occlGetLastError(nullptr);
  ASSERT_EQ(occlMemAlloc(&out, 16 * sizeof(float)), occlSuccess) << occlGetLastError(nullptr);
  CallbackCounter done;
  for (int i = 0; i < 2; ++i) {
    expectOk(occlSubmit(c, 7, in, out, &CallbackCounter::callback, done.arg()), c, "submit");
    expectOk(occlCommWaitAll(c, 10000), c, "wait");
  }
  ASSERT_EQ(occlMemFree(out), occlSuccess);
  EXPECT_OCCL_ERROR(occlSubmit(c, 7, in, out, &CallbackCounter::callback, done.arg()), occlInvalidArgument, c,
                    "recvbuf of collId 0x7 is not memory from occlMemAlloc");
  float stack[16] = {};
  EXPECT_OCCL_ERROR(occlSubmit(c, 7, stack, stack, &CallbackCounter::callback, done.arg()), occlInvalidArgument, c,
                    "sendbuf of collId 0x7 is not memory from occlMemAlloc");
  ASSERT_EQ(occlMemAlloc(&out, 16 * sizeof(float)), occlSuccess) << occlGetLastError(nullptr);
  expectOk(occlSubmit(c, 7, in, out, &CallbackCounter::callback, done.arg()), c, "submit after a new allocation");
  expectOk(occlCommWaitAll(c, 10000), c, "wait");
  EXPECT_EQ(done.fired().size(), 3u);
  EXPECT_EQ(occlMemFree(in), occlSuccess);
  EXPECT_EQ(occlMemFree(out), occlSuccess);
}

TEST(BadInputTest, UnknownCollId) {
  CommGroup comms(1);
  occlComm_t c = comms[0];
  float buf[4] = {};
  occlCollStats_t stats;
  EXPECT_OCCL_ERROR(occlSubmit(c, 0xABC, buf, buf, nullptr, nullptr), occlInvalidArgument, c, "0xabc");
  EXPECT_OCCL_ERROR(occlCollDeregister(c, 0xABC), occlInvalidArgument, c, "not registered");
  EXPECT_OCCL_ERROR(occlCollGetStats(c, 0xABC, &stats), occlInvalidArgument, c, "not registered");
}

TEST(BadInputTest, DescriptionFields) {
  CommGroup comms(2);
  occlComm_t c = comms[0];
  const std::vector<std::pair<std::function<void(occlCollDesc_t&)>, const char*>> cases = {
      {[](occlCollDesc_t& d) { d.count = SIZE_MAX; }, "count"},
      {[](occlCollDesc_t& d) { d.count = SIZE_MAX / 4 + 1; }, "count"},
      {[](occlCollDesc_t& d) { d.type = occlNumCollTypes; }, "desc.type"},
      {[](occlCollDesc_t& d) { d.type = -1; }, "desc.type"},
      {[](occlCollDesc_t& d) { d.datatype = occlNumTypes; }, "desc.datatype"},
      {[](occlCollDesc_t& d) { d.op = occlNumOps; }, "desc.op"},
      {[](occlCollDesc_t& d) { d.nBlocks = -1; }, "desc.nBlocks"},
      {[](occlCollDesc_t& d) { d.nBlocks = 65; }, "desc.nBlocks"},
      {[](occlCollDesc_t& d) { d.sharedBuffers = 2; }, "desc.sharedBuffers"},
      {[](occlCollDesc_t& d) { d.algorithm = "no-such-algorithm"; }, "desc.algorithm"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    occlCollDesc_t d = allReduce(8);
    cases[i].first(d);
    SCOPED_TRACE(cases[i].second);
    EXPECT_OCCL_ERROR(occlCollRegister(c, 100 + i, &d), occlInvalidArgument, c, cases[i].second);
  }
  // A failed registration leaves the collId free.
  occlCollDesc_t good = allReduce(8);
  expectOk(occlCollRegister(c, 100, &good), c, "register after a failure");
}

TEST(BadInputTest, RankAndSizeOutOfRange) {
  occlUniqueId id;
  expectOk(occlGetUniqueId(&id), nullptr, "unique id");
  occlConfig_t cfg = testConfig();
  occlComm_t comm = nullptr;
  EXPECT_OCCL_ERROR(occlCommInitRank(&comm, 2, id, 2, &cfg), occlInvalidArgument, nullptr, "rank = 2");
  EXPECT_OCCL_ERROR(occlCommInitRank(&comm, 2, id, -1, &cfg), occlInvalidArgument, nullptr, "rank = -1");
  EXPECT_OCCL_ERROR(occlCommInitRank(&comm, 0, id, 0, &cfg), occlInvalidArgument, nullptr, "nranks");
  EXPECT_EQ(comm, nullptr);
  occlUniqueId garbage{};
  EXPECT_OCCL_ERROR(occlCommInitRank(&comm, 2, garbage, 0, &cfg), occlInvalidArgument, nullptr, "id");
  occlComm_t comms[1];
  EXPECT_OCCL_ERROR(occlCommInitAll(comms, 0, nullptr, &cfg), occlInvalidArgument, nullptr, "ndev");
}

TEST(BadInputTest, ConfigFieldsAreNamed) {
  using Mutator = std::function<void(occlConfig_t&)>;
  const std::vector<std::pair<const char*, Mutator>> cases = {
      {"structSize", [](occlConfig_t& c) { c.structSize = 0; }},
      {"backend", [](occlConfig_t& c) { c.backend = 7; }},
      {"daemonBlocks", [](occlConfig_t& c) { c.daemonBlocks = -1; }},
      {"daemonBlocks", [](occlConfig_t& c) { c.daemonBlocks = 65; }},
      {"threadsPerBlock", [](occlConfig_t& c) { c.threadsPerBlock = 33; }},
      {"sqDepth", [](occlConfig_t& c) { c.sqDepth = 3; }},
      {"cqDepth", [](occlConfig_t& c) { c.cqDepth = 0; }},
      {"taskQueueDepth", [](occlConfig_t& c) { c.taskQueueDepth = 0; }},
      {"maxInflightPerColl", [](occlConfig_t& c) { c.maxInflightPerColl = 3; }},
      {"maxInflightPerColl", [](occlConfig_t& c) { c.maxInflightPerColl = 128; }},
      {"connectorSlots", [](occlConfig_t& c) { c.connectorSlots = 1; }},
      {"connectorSlotBytes", [](occlConfig_t& c) { c.connectorSlotBytes = 100; }},
      {"orderPolicy", [](occlConfig_t& c) { c.orderPolicy = 3; }},
      {"spinPolicy", [](occlConfig_t& c) { c.spinPolicy = -1; }},
      {"spinThresholdMax", [](occlConfig_t& c) { c.spinThresholdMax = 0; }},
      {"spinThresholdMin", [](occlConfig_t& c) { c.spinThresholdMin = c.spinThresholdMax + 1; }},
      {"idleQuitUs", [](occlConfig_t& c) { c.idleQuitUs = -1; }},
      {"collTimeoutMs", [](occlConfig_t& c) { c.collTimeoutMs = -1; }},
      {"initTimeoutMs", [](occlConfig_t& c) { c.initTimeoutMs = 0; }},
      // Milliseconds whose nanoseconds from now would overflow an int64_t deadline.
      {"collTimeoutMs", [](occlConfig_t& c) { c.collTimeoutMs = OCCL_MAX_TIMEOUT_MS + 1; }},
      {"collTimeoutMs", [](occlConfig_t& c) { c.collTimeoutMs = INT64_MAX; }},
      {"initTimeoutMs", [](occlConfig_t& c) { c.initTimeoutMs = INT64_MAX / 1000; }},
      {"forcePreempt", [](occlConfig_t& c) { c.forcePreempt = c.disablePreemption = 1; }},
      {"timelineDepth", [](occlConfig_t& c) { c.timelineDepth = -1; }},
      {"timelineDepth", [](occlConfig_t& c) { c.timelineDepth = 65537; }},
  };
  for (const auto& [field, mutate] : cases) {
    occlConfig_t cfg = testConfig();
    mutate(cfg);
    occlComm_t comms[2] = {nullptr, nullptr};
    EXPECT_OCCL_ERROR(occlCommInitAll(comms, 2, nullptr, &cfg), occlInvalidArgument, nullptr,
                      std::string("config.") + field);
    EXPECT_EQ(comms[0], nullptr) << field;
  }
}

// The longest timeouts are accepted (and 100 years of waiting is not a wrap-around into the past);
// one millisecond more is refused, naming the argument and the bound.
TEST(BadInputTest, TimeoutsUpToTheirBound) {
  occlConfig_t cfg = testConfig();
  cfg.collTimeoutMs = OCCL_MAX_TIMEOUT_MS;
  CommGroup comms(2, cfg);
  registerBoth(comms, 1, 4);
  std::vector<float> data[2] = {{1, 2, 3, 4}, {1, 2, 3, 4}};
  for (int r = 0; r < 2; ++r) {
    expectOk(occlSubmit(comms[r], 1, data[r].data(), data[r].data(), nullptr, nullptr), comms[r], "submit");
  }
  for (int r = 0; r < 2; ++r) expectOk(occlCommWaitAll(comms[r], OCCL_MAX_TIMEOUT_MS), comms[r], "waitAll");
  EXPECT_EQ(data[0], (std::vector<float>{2, 4, 6, 8}));
  EXPECT_OCCL_ERROR(occlCommWaitAll(comms[0], OCCL_MAX_TIMEOUT_MS + 1), occlInvalidArgument, comms[0], "timeoutMs");
  EXPECT_OCCL_ERROR(occlCommWaitAll(comms[0], INT64_MAX), occlInvalidArgument, comms[0], "OCCL_MAX_TIMEOUT_MS");
}

TEST(BadInputTest, InPlaceMisuse) {
  CommGroup comms(1);
  occlComm_t c = comms[0];
  registerBoth(comms, 9, 64);
  std::vector<float> buf(128, 1.0f);
  EXPECT_OCCL_ERROR(occlSubmit(c, 9, buf.data() + 1, buf.data(), nullptr, nullptr), occlInvalidArgument, c, "in place");
  EXPECT_OCCL_ERROR(occlSubmit(c, 9, buf.data(), buf.data() + 63, nullptr, nullptr), occlInvalidArgument, c, "overlap");
  // NCCL's in-place position and disjoint buffers are both fine.
  CallbackCounter done;
  expectOk(occlSubmit(c, 9, buf.data(), buf.data(), &CallbackCounter::callback, done.arg()), c, "in place");
  expectOk(occlSubmit(c, 9, buf.data(), buf.data() + 64, &CallbackCounter::callback, done.arg()), c, "adjacent");
  EXPECT_TRUE(done.waitFor(2, std::chrono::seconds(10)));
}

TEST(BadInputTest, RegisterTwiceAndDeregisterInFlight) {
  CommGroup comms(2);
  occlComm_t c = comms[0];
  registerBoth(comms, 0x77, 32);
  occlCollDesc_t d = allReduce(32);
  EXPECT_OCCL_ERROR(occlCollRegister(c, 0x77, &d), occlInvalidUsage, c, "already registered");

  std::vector<float> b0(32, 1.0f), b1(32, 2.0f);
  CallbackCounter done[2];
  expectOk(occlSubmit(comms[0], 0x77, b0.data(), b0.data(), &CallbackCounter::callback, done[0].arg()), c, "submit");
  EXPECT_OCCL_ERROR(occlCollDeregister(c, 0x77), occlInvalidUsage, c, "in flight");
  expectOk(occlSubmit(comms[1], 0x77, b1.data(), b1.data(), &CallbackCounter::callback, done[1].arg()), comms[1], "submit");
  for (int r = 0; r < 2; ++r) expectOk(occlCommWaitAll(comms[r], 30000), comms[r], "waitAll");
  EXPECT_EQ(b0[0], 3.0f);
  expectOk(occlCollDeregister(c, 0x77), c, "deregister once idle");
  EXPECT_OCCL_ERROR(occlSubmit(c, 0x77, b0.data(), b0.data(), nullptr, nullptr), occlInvalidArgument, c,
                    "not registered");
}

TEST(BadInputTest, TooManyInFlight) {
  occlConfig_t cfg = testConfig();
  cfg.maxInflightPerColl = 2;
  CommGroup comms(2, cfg);
  registerBoth(comms, 0x51, 8);
  std::vector<std::vector<float>> bufs(6, std::vector<float>(8, 1.0f));
  CallbackCounter done[2];
  for (int k = 0; k < 2; ++k)
    expectOk(occlSubmit(comms[0], 0x51, bufs[k].data(), bufs[k].data(), &CallbackCounter::callback, done[0].arg()),
             comms[0], "submit within the window");
  EXPECT_OCCL_ERROR(occlSubmit(comms[0], 0x51, bufs[2].data(), bufs[2].data(), nullptr, nullptr), occlInProgress,
                    comms[0], "maxInflightPerColl");
  for (int k = 3; k < 5; ++k)
    expectOk(occlSubmit(comms[1], 0x51, bufs[k].data(), bufs[k].data(), &CallbackCounter::callback, done[1].arg()),
             comms[1], "peer submit");
  EXPECT_TRUE(done[0].waitFor(2, std::chrono::seconds(30)));
  EXPECT_TRUE(done[1].waitFor(2, std::chrono::seconds(30)));
}

TEST(BadInputTest, UseAfterFinalize) {
  CommGroup comms(1);
  occlComm_t c = comms[0];
  registerBoth(comms, 3, 4);
  expectOk(occlCommFinalize(c), c, "finalize");
  float buf[4] = {};
  occlCollDesc_t d = allReduce(4);
  EXPECT_OCCL_ERROR(occlSubmit(c, 3, buf, buf, nullptr, nullptr), occlInvalidUsage, c, "finalized");
  EXPECT_OCCL_ERROR(occlCollRegister(c, 4, &d), occlInvalidUsage, c, "finalized");
  EXPECT_OCCL_ERROR(occlCommFinalize(c), occlInvalidUsage, c, "finalized");
}

// Rank 0 registers count 100; rank 1 registers count 200. Rank 1's registration fails naming
// the collId and the peer; rank 0's submission, made before or after that, fails through its
// callback instead of waiting for data that will never come.
void registrationDiffers(bool submitFirst) {
  occlConfig_t cfg = testConfig();
  cfg.collTimeoutMs = 3000;
  CommGroup comms(2, cfg);
  constexpr uint64_t kId = 0xD1FF;
  occlCollDesc_t d0 = allReduce(100), d1 = allReduce(200);
  expectOk(occlCollRegister(comms[0], kId, &d0), comms[0], "rank 0 register");
  std::vector<float> buf(100, 1.0f);
  CallbackCounter done;
  auto start = std::chrono::steady_clock::now();
  auto submit = [&] {
    expectOk(occlSubmit(comms[0], kId, buf.data(), buf.data(), &CallbackCounter::callback, done.arg()), comms[0], "submit");
  };
  if (submitFirst) submit();
  EXPECT_OCCL_ERROR(occlCollRegister(comms[1], kId, &d1), occlInvalidUsage, comms[1], "0xd1ff");
  EXPECT_NE(std::string(occlGetLastError(comms[1])).find("rank 0"), std::string::npos) << occlGetLastError(comms[1]);
  if (!submitFirst) submit();
  ASSERT_TRUE(done.waitFor(1, std::chrono::seconds(10))) << "rank 0's submission never completed";
  EXPECT_EQ(done.fired()[0].second, occlInvalidUsage);
  const std::string why = occlGetLastError(comms[0]);
  EXPECT_NE(why.find("collId 0xd1ff, submission 0: ranks disagree on it: a peer registered this collId differently"), std::string::npos) << why;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(cfg.collTimeoutMs + 1000));
}

TEST(BadInputTest, RegistrationDiffersBetweenRanksSubmittedBefore) { registrationDiffers(true); }
TEST(BadInputTest, RegistrationDiffersBetweenRanksSubmittedAfter) { registrationDiffers(false); }

}  // namespace
}  // namespace occl::test
