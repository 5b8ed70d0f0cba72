// A build that keeps some types and ops only (OCCL_ONLY_DTYPE_MASK, OCCL_ONLY_OP_MASK:
// primitives/dispatch.hpp): its dispatch reaches only those pairs and dispatchCompiled names
// them. This file is its own program, built with float32 and Sum kept, and links no occl code:
// the masks must be the same in every file of a program.
#define OCCL_ONLY_DTYPE_MASK 0x80u
#define OCCL_ONLY_OP_MASK 0x1u

#include <gtest/gtest.h>

#include <type_traits>

#include "primitives/dispatch.hpp"

namespace occl {
namespace {

static_assert(occlFloat32 == 7 && ops::OpOf_t<0>::kOp == occlSum, "the masks above keep float32 and Sum");

TEST(DispatchMask, OnlyTheKeptPairsRun) {
  int calls = 0;
  auto f = [&]<typename T, typename Op>() {
    ++calls;
    return std::is_same_v<T, float> && std::is_same_v<Op, ops::Sum>;
  };
  EXPECT_TRUE(dispatchTypeOp(occlFloat32, occlSum, f));
  EXPECT_EQ(calls, 1);
  EXPECT_FALSE(dispatchTypeOp(occlFloat32, occlMax, f)) << "an op the mask leaves out ran";
  EXPECT_FALSE(dispatchTypeOp(occlFloat64, occlSum, f)) << "a type the mask leaves out ran";
  EXPECT_FALSE(dispatchTypeOp(occlInt8, occlSum, f));
  EXPECT_EQ(calls, 1);
  int typeCalls = 0;
  auto g = [&]<typename T>() { return ++typeCalls, sizeof(T); };
  EXPECT_EQ(dispatchType(occlFloat32, g), sizeof(float));
  EXPECT_EQ(dispatchType(occlFloat16, g), 0u);
  EXPECT_EQ(typeCalls, 1);
}

TEST(DispatchMask, CompiledPairsAreTheMasksOnly) {
  EXPECT_TRUE(dispatchCompiled(occlFloat32, occlSum));
  for (int t = 0; t < occlNumTypes; ++t)
    for (int o = 0; o < ops::kNumOpKinds; ++o)
      EXPECT_EQ(dispatchCompiled(t, o), t == occlFloat32 && o == occlSum) << "type " << t << " op " << o;
  EXPECT_FALSE(dispatchCompiled(-1, occlSum));
  EXPECT_FALSE(dispatchCompiled(occlFloat32, ops::kNumOpKinds));
}

}  // namespace
}  // namespace occl
