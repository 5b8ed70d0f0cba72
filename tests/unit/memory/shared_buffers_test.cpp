// occlMemAlloc memory (memory/shared_buffers.hpp): what describe() says of a pointer, and another
// process mapping it through resolve(): the same bytes, a freed region unmapped at the next
// lookup, and a reference that names another file refused.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "memory/shared_buffers.hpp"
#include "occl/occl.h"

namespace occl::memory {
namespace {

TEST(SharedBuffersTest, DescribeFindsTheRegionOfEveryByteAndNothingElse) {
  void* p = nullptr;
  ASSERT_EQ(occlMemAlloc(&p, 10000), occlSuccess) << occlGetLastError(nullptr);
  char* c = static_cast<char*>(p);
  const SharedRef whole = describe(c, 10000);
  EXPECT_NE(whole.inode, 0u);
  EXPECT_EQ(whole.offset, 0u);
  EXPECT_EQ(whole.pid, getpid());
  const SharedRef inner = describe(c + 100, 50);
  EXPECT_EQ(inner.inode, whole.inode);
  EXPECT_EQ(inner.offset, 100u);
  EXPECT_EQ(describe(c + 100, 1u << 20).inode, 0u) << "runs past the region";
  std::vector<char> elsewhere(64);
  EXPECT_EQ(describe(elsewhere.data(), 64).inode, 0u);
  EXPECT_EQ(static_cast<unsigned char>(c[9999]), 0u) << "zeroed";
  Result<char*> own = resolve(inner, 50);
  ASSERT_TRUE(own.ok()) << own.status().message;
  EXPECT_EQ(own.value(), c + 100) << "a region of this process resolves to itself";
  EXPECT_EQ(occlMemFree(p), occlSuccess);
  EXPECT_EQ(describe(c, 1).inode, 0u) << "freed";
  c[9999] = 1;  // pinned by the resolve: freed but still mapped (an unmapped page would fault)
  unpin(own.value());
}

TEST(SharedBuffersTest, BadArgumentsAreRefusedNamingWhatWasWrong) {
  void* p = nullptr;
  EXPECT_EQ(occlMemAlloc(&p, 0), occlInvalidArgument);
  EXPECT_NE(std::string(occlGetLastError(nullptr)).find("size is 0"), std::string::npos) << occlGetLastError(nullptr);
  EXPECT_EQ(occlMemAlloc(nullptr, 64), occlInvalidArgument);
  ASSERT_EQ(occlMemAlloc(&p, 64), occlSuccess);
  EXPECT_EQ(occlMemFree(static_cast<char*>(p) + 8), occlInvalidArgument) << "not what occlMemAlloc returned";
  EXPECT_NE(std::string(occlGetLastError(nullptr)).find("not a pointer occlMemAlloc returned"), std::string::npos);
  EXPECT_EQ(occlMemFree(p), occlSuccess);
  EXPECT_EQ(occlMemFree(p), occlInvalidArgument) << "freed twice";
  EXPECT_EQ(occlMemFree(nullptr), occlSuccess);
}

// Runs `child` in a forked process; returns its exit code (the child reports failures by code).
template <typename F>
int inChild(F&& child) {
  const pid_t pid = fork();
  if (pid == 0) _exit(child());
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
}

TEST(SharedBuffersTest, AnotherProcessMapsTheRegionAndSeesTheSameBytes) {
  void* p = nullptr;
  ASSERT_EQ(occlMemAlloc(&p, 1 << 20), occlSuccess);
  auto* words = static_cast<uint32_t*>(p);
  for (uint32_t i = 0; i < (1u << 18); ++i) words[i] = i * 2654435761u;
  const SharedRef ref = describe(words + 1000, 4096);
  const int code = inChild([&] {
    // A forked child has its own pid: resolve goes through /proc/<parent>/fd, not its copy of the map.
    Result<char*> q = resolve(ref, 4096);
    if (!q.ok()) return 1;
    if (q.value() == reinterpret_cast<char*>(words + 1000)) return 2;  // a fresh mapping, not the inherited one
    const auto* seen = reinterpret_cast<uint32_t*>(q.value());
    for (uint32_t i = 0; i < 1024; ++i)
      if (seen[i] != (1000 + i) * 2654435761u) return 3;
    reinterpret_cast<uint32_t*>(q.value())[0] = 7;  // the parent reads it
    if (peerMappings() != 1) return 4;
    if (resolve(ref, 1 << 20).ok()) return 5;  // past the region's end
    if (describe(words, 4).pid != getpid()) return 7;  // the inherited region, described as the child's
    SharedRef wrong = ref;
    wrong.inode += 1;
    Result<char*> w = resolve(wrong, 16);
    if (w.ok() || w.status().message.find("is not the peer's occlMemAlloc buffer") == std::string::npos) return 6;
    return 0;
  });
  EXPECT_EQ(code, 0);
  EXPECT_EQ(words[1000], 7u) << "the child's write is in the parent's memory";
  EXPECT_EQ(occlMemFree(p), occlSuccess);
}

TEST(SharedBuffersTest, AFreedRegionIsUnmappedOnceFoundStaleAndUnpinned) {
  int toChild[2], toParent[2];
  ASSERT_EQ(pipe(toChild), 0);
  ASSERT_EQ(pipe(toParent), 0);
  void* a = nullptr;
  ASSERT_EQ(occlMemAlloc(&a, 4096), occlSuccess);
  const SharedRef refA = describe(a, 4096);
  const int parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    Result<char*> inA = resolve(refA, 4096);  // pinned, as a fold holds it
    if (!inA.ok() || peerMappings() != 1) _exit(1);
    if (write(toParent[1], "m", 1) != 1) _exit(2);
    SharedRef refB{};
    if (read(toChild[0], &refB, sizeof refB) != sizeof refB) _exit(3);
    if (refB.pid != parent) _exit(4);
    Result<char*> inB = resolve(refB, 4096);
    if (!inB.ok()) _exit(5);
    if (peerMappings() != 2) _exit(6);  // A is stale but pinned: still mapped
    inA.value()[0] = 1;                 // and still writable
    unpin(inA.value());
    if (peerMappings() != 1) _exit(7);  // gone at its last unpin
    unpin(inB.value());
    _exit(peerMappings() == 1 ? 0 : 8);  // B is live: kept for the next submission
  }
  char m = 0;
  ASSERT_EQ(read(toParent[0], &m, 1), 1);
  EXPECT_EQ(occlMemFree(a), occlSuccess);
  void* b = nullptr;
  ASSERT_EQ(occlMemAlloc(&b, 4096), occlSuccess);
  const SharedRef refB = describe(b, 4096);
  ASSERT_EQ(write(toChild[1], &refB, sizeof refB), static_cast<ssize_t>(sizeof refB));
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(occlMemFree(b), occlSuccess);
  for (int fd : {toChild[0], toChild[1], toParent[0], toParent[1]}) close(fd);
}

}  // namespace
}  // namespace occl::memory
