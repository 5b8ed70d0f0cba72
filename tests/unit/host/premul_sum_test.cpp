// PreMulSum (occlRedOpCreatePreMulSum): AllReduce, Reduce and ReduceScatter of every datatype,
// in and out of place, on the default algorithms and the ring, each rank with a scalar of its own,
// checked bit-exactly (inputs and scalars are small integers, so every product and partial sum
// is exact in every type, 8-bit floats included). A scalar given by address is read when the
// submission runs; a handle that is unknown, destroyed or of another datatype is refused by name.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_format.h"
#include "device/coll_types.hpp"
#include "device/dtypes.hpp"
#include "occl/occl.h"
#include "occl/occl.hpp"
#include "primitives/dispatch.hpp"
#include "support/ranks.hpp"
#include "support/refusals.hpp"

namespace occl::test {
namespace {

int64_t inputOf(int rank, size_t i) { return static_cast<int64_t>((i + static_cast<size_t>(rank)) % 3) - 1; }

// 2 and -1 alternate (e5m2, which holds integers only to 8, takes 1 and -1): a rank's product is
// within +-2, a sum on up to 8 ranks within +-12.
int64_t scalarOf(int dtype, int rank) {
  if (dtype == occlFloat8e5m2) return rank % 2 == 0 ? 1 : -1;
  return rank % 2 == 0 ? 2 : -1;
}

int64_t reducedAt(int nRanks, size_t i, const std::vector<int64_t>& scalars) {
  int64_t sum = 0;
  for (int r = 0; r < nRanks; ++r) sum += scalars[static_cast<size_t>(r)] * inputOf(r, i);
  return sum;
}

struct Case {
  int type;
  int dtype;
  size_t count;
  bool inPlace;
  const char* algorithm;  // nullptr: the default
};

std::string describe(const Case& c) {
  return absl::StrFormat("%s %s count=%d %s algorithm=%s", collTypeName(c.type), dtypeName(c.dtype), c.count,
                         c.inPlace ? "in-place" : "out-of-place", c.algorithm != nullptr ? c.algorithm : "default");
}

constexpr int kRoot = 1;

// Writes element i of a T buffer from a small integer, or compares it.
void put(int dtype, void* base, size_t i, int64_t v) {
  dispatchType(dtype, [&]<typename T>() { static_cast<T*>(base)[i] = fromInt<T>(v); });
}
bool holds(int dtype, const void* base, size_t i, int64_t v) {
  return dispatchType(dtype, [&]<typename T>() {
    const T want = fromInt<T>(v);
    return std::memcmp(static_cast<const T*>(base) + i, &want, sizeof(T)) == 0;
  });
}

// Runs one case on `comms` (registered as `collId`, with each rank's PreMulSum op of the case's
// datatype made from its scalar) and returns what went wrong, or "".
std::string runCase(CommGroup& comms, const Case& c, uint64_t collId, occlScalarResidence_t residence,
                    const std::vector<int64_t>& scalars) {
  const int n = comms.size();
  const size_t eb = dtypeSize(c.dtype);
  const size_t sendElems = c.type == occlCollReduceScatter ? c.count * static_cast<size_t>(n) : c.count;
  std::vector<std::vector<std::byte>> send(static_cast<size_t>(n), std::vector<std::byte>(sendElems * eb + 8));
  std::vector<std::vector<std::byte>> recv(static_cast<size_t>(n), std::vector<std::byte>(c.count * eb + 8));
  std::vector<uint64_t> scalarStore(static_cast<size_t>(n));  // an occlScalarDevice op reads these
  std::vector<std::string> errors(static_cast<size_t>(n));
  runRanks(n, [&](int r) {
    const auto ru = static_cast<size_t>(r);
    for (size_t i = 0; i < sendElems; ++i) put(c.dtype, send[ru].data(), i, inputOf(r, i));
    put(c.dtype, &scalarStore[ru], 0, scalars[ru]);
    occlRedOp_t op;
    void* scalar = &scalarStore[ru];
    if (occlRedOpCreatePreMulSum(&op, scalar, static_cast<occlDataType_t>(c.dtype), residence, comms[r]) != occlSuccess) {
      errors[ru] = std::string("occlRedOpCreatePreMulSum: ") + occlGetLastError(comms[r]);
      return;
    }
    occlCollDesc_t d;
    occlCollDescInit(&d);
    d.type = c.type;
    d.count = c.count;
    d.datatype = c.dtype;
    d.op = op;
    d.root = kRoot % n;
    d.algorithm = c.algorithm;
    if (occlCollRegister(comms[r], collId, &d) != occlSuccess) {
      errors[ru] = std::string("occlCollRegister: ") + occlGetLastError(comms[r]);
      return;
    }
    // The registration keeps the scalar (or its address): the handle may go now.
    expectOk(occlRedOpDestroy(op, comms[r]), comms[r], "occlRedOpDestroy");
    const char* algorithm = nullptr;
    expectOk(occlCollGetAlgorithm(comms[r], collId, c.inPlace ? 1 : 0, &algorithm), comms[r], "occlCollGetAlgorithm");
    if (algorithm != nullptr && std::string_view(algorithm) == "peer") errors[ru] = "PreMulSum ran the peer algorithm";
    void* out = recv[ru].data();
    if (c.inPlace) out = c.type == occlCollReduceScatter ? send[ru].data() + ru * c.count * eb : send[ru].data();
    expectOk(occlSubmit(comms[r], collId, send[ru].data(), out, nullptr, nullptr), comms[r], "occlSubmit");
    expectOk(occlCommWaitAll(comms[r], 60000), comms[r], "occlCommWaitAll");
    expectOk(occlCollDeregister(comms[r], collId), comms[r], "occlCollDeregister");
    if (c.type == occlCollReduce && r != kRoot % n) return;
    const std::byte* got = c.inPlace ? static_cast<const std::byte*>(out) : recv[ru].data();
    const size_t first = c.type == occlCollReduceScatter ? ru * c.count : 0;
    for (size_t i = 0; i < c.count; ++i) {
      const int64_t want = reducedAt(n, first + i, scalars);
      if (!holds(c.dtype, got, i, want)) {
        errors[ru] = absl::StrFormat("rank %d element %d: expected %d", r, i, want);
        return;
      }
    }
  });
  for (int r = 0; r < n; ++r)
    if (!errors[static_cast<size_t>(r)].empty()) return describe(c) + ": " + errors[static_cast<size_t>(r)];
  return "";
}

std::vector<int64_t> scalarsFor(int dtype, int n) {
  std::vector<int64_t> s;
  for (int r = 0; r < n; ++r) s.push_back(scalarOf(dtype, r));
  return s;
}

// Every datatype, the three reducing collectives, a count for the direct program (AllReduce's
// default for a small count), one past the peer bound on thread ranks (where Sum would run peer)
// and one of several tiles, in and out of place, on the default algorithm and the ring.
TEST(PreMulSum, EveryDtypeAndReducingCollectiveIsExact) {
  for (int n : {1, 3, 4}) {
    CommGroup comms(n);
    uint64_t collId = 0x7000;
    for (int dtype = 0; dtype < occlNumTypes; ++dtype) {
      if (onSimt() && dtype % 3 != 0 && dtype != occlFloat8e4m3) continue;  // simt: a third, and fp8
      for (int type : {occlCollAllReduce, occlCollReduce, occlCollReduceScatter})
        for (size_t count : {size_t{7}, size_t{20000}, size_t{70001}})
          for (bool inPlace : {false, true})
            for (const char* algorithm : {static_cast<const char*>(nullptr), "ring"}) {
              if (onSimt() && count == 70001) continue;
              const Case c{type, dtype, count, inPlace, algorithm};
              const std::string bad = runCase(comms, c, collId++, occlScalarHostImmediate, scalarsFor(dtype, n));
              ASSERT_TRUE(bad.empty()) << n << " ranks: " << bad;
            }
    }
  }
}

// occlScalarDevice: the scalar is read when the submission runs, so a new value between
// submissions is the one used.
TEST(PreMulSum, ScalarByAddressIsReadWhenTheSubmissionRuns) {
  constexpr int kRanks = 4;
  constexpr size_t kCount = 5000;
  CommGroup comms(kRanks);
  float scalars[kRanks] = {2.0f, -1.0f, 2.0f, -1.0f};
  std::vector<std::vector<float>> send(kRanks, std::vector<float>(kCount)), recv(kRanks, std::vector<float>(kCount));
  runRanks(kRanks, [&](int r) {
    occlRedOp_t op;
    expectOk(occlRedOpCreatePreMulSum(&op, &scalars[r], occlFloat32, occlScalarDevice, comms[r]), comms[r], "create");
    occlCollDesc_t d;
    occlCollDescInit(&d);
    d.type = occlCollAllReduce;
    d.count = kCount;
    d.datatype = occlFloat32;
    d.op = op;
    expectOk(occlCollRegister(comms[r], 0x77, &d), comms[r], "register");
    for (size_t i = 0; i < kCount; ++i) send[static_cast<size_t>(r)][i] = static_cast<float>(inputOf(r, i));
  });
  for (int round = 0; round < 3; ++round) {
    runRanks(kRanks, [&](int r) {
      expectOk(occlSubmit(comms[r], 0x77, send[static_cast<size_t>(r)].data(), recv[static_cast<size_t>(r)].data(),
                          nullptr, nullptr),
               comms[r], "submit");
      expectOk(occlCommWaitAll(comms[r], 60000), comms[r], "wait");
    });
    for (int r = 0; r < kRanks; ++r)
      for (size_t i = 0; i < kCount; ++i) {
        float want = 0;
        for (int q = 0; q < kRanks; ++q) want += scalars[q] * static_cast<float>(inputOf(q, i));
        ASSERT_EQ(recv[static_cast<size_t>(r)][i], want) << "round " << round << " rank " << r << " element " << i;
      }
    for (float& s : scalars) s += 1.0f;  // between submissions: every rank's next one sees it
  }
}

TEST(PreMulSum, BadHandlesAndArgumentsAreRefusedByName) {
  CommGroup comms(1);
  occlComm_t c = comms[0];
  float two = 2.0f;
  occlRedOp_t op;
  const occlResult_t bad = occlInvalidArgument;
  EXPECT_OCCL_ERROR(occlRedOpCreatePreMulSum(nullptr, &two, occlFloat32, occlScalarHostImmediate, c), bad, c,
                    "op is NULL");
  EXPECT_OCCL_ERROR(occlRedOpCreatePreMulSum(&op, nullptr, occlFloat32, occlScalarHostImmediate, c), bad, c,
                    "scalar is NULL");
  EXPECT_OCCL_ERROR(occlRedOpCreatePreMulSum(&op, &two, static_cast<occlDataType_t>(12), occlScalarHostImmediate, c),
                    bad, c, "datatype = 12");
  EXPECT_OCCL_ERROR(occlRedOpCreatePreMulSum(&op, &two, occlFloat32, static_cast<occlScalarResidence_t>(7), c), bad,
                    c, "residence = 7");
  expectOk(occlRedOpCreatePreMulSum(&op, &two, occlFloat32, occlScalarHostImmediate, c), c, "create");
  EXPECT_GE(static_cast<int>(op), static_cast<int>(occlNumOps));
  occlCollDesc_t d;
  occlCollDescInit(&d);
  d.type = occlCollAllReduce;
  d.count = 16;
  d.datatype = occlFloat64;
  d.op = op;
  EXPECT_OCCL_ERROR(occlCollRegister(c, 1, &d), bad, c, "a PreMulSum op of datatype float; desc.datatype is double");
  d.datatype = occlFloat32;
  d.op = static_cast<occlRedOp_t>(op + 1);
  EXPECT_OCCL_ERROR(occlCollRegister(c, 2, &d), bad, c, "or a live PreMulSum op of this communicator");
  d.op = op;
  expectOk(occlCollRegister(c, 3, &d), c, "register");
  expectOk(occlRedOpDestroy(op, c), c, "destroy");
  EXPECT_OCCL_ERROR(occlRedOpDestroy(op, c), bad, c, "not a PreMulSum op of this communicator");
  EXPECT_OCCL_ERROR(occlRedOpDestroy(occlSum, c), bad, c, "built-in ops are never destroyed");
  EXPECT_OCCL_ERROR(occlCollRegister(c, 4, &d), bad, c, "live PreMulSum op");
  // A collective that does not reduce ignores its op, PreMulSum handle or not (as NCCL's do).
  d.type = occlCollAllGather;
  expectOk(occlCollRegister(c, 5, &d), c, "register an AllGather with a destroyed op");
  // The one registered before the destroy still runs, with its scalar: one rank, so 2 x input.
  float in[16], out[16];
  for (int i = 0; i < 16; ++i) in[i] = static_cast<float>(i - 5);
  expectOk(occlSubmit(c, 3, in, out, nullptr, nullptr), c, "submit");
  expectOk(occlCommWaitAll(c, 60000), c, "wait");
  for (int i = 0; i < 16; ++i) EXPECT_EQ(out[i], 2.0f * in[i]) << i;
}

// The C++ wrapper: createPreMulSum, destroyRedOp, and its refusal as an occl::Error.
TEST(PreMulSum, TheWrapperMakesAndDestroysOps) {
  occlConfig_t config = testConfig();
  std::vector<occl::Comm> comms = occl::Comm::all(2, &config);
  double scalars[2] = {3.0, -2.0};
  std::vector<double> buf[2];
  runRanks(2, [&](int r) {
    occl::Comm& c = comms[static_cast<size_t>(r)];
    const occlRedOp_t op = c.createPreMulSum(&scalars[r], occlFloat64, occlScalarHostImmediate);
    occlCollDesc_t d;
    occlCollDescInit(&d);
    d.count = 64;
    d.datatype = occlFloat64;
    d.op = op;
    c.registerCollective(0x55, d);
    c.destroyRedOp(op);
    EXPECT_THROW(c.destroyRedOp(op), occl::Error);
    buf[r].assign(64, static_cast<double>(r + 1));
    c.submit(0x55, buf[r].data(), buf[r].data(), [](uint64_t, occlResult_t) {});
    c.waitAll(60000);
  });
  for (int r = 0; r < 2; ++r) EXPECT_EQ(buf[r], std::vector<double>(64, 3.0 * 1 + -2.0 * 2)) << "rank " << r;
}

}  // namespace
}  // namespace occl::test
