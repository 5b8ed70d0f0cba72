#include "moe.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"

namespace occl::bench::moe {
namespace {

// "4096", "4K", "1M": a count with an optional binary suffix.
bool parseSize(const std::string& text, uint64_t& out) {
  if (text.empty()) return false;
  uint64_t scale = 1;
  std::string digits = text;
  switch (text.back()) {
    case 'K': case 'k': scale = 1ull << 10; break;
    case 'M': case 'm': scale = 1ull << 20; break;
    case 'G': case 'g': scale = 1ull << 30; break;
    default: break;
  }
  if (scale != 1) digits.pop_back();
  uint64_t v = 0;
  if (!absl::SimpleAtoi(digits, &v) || v > UINT64_MAX / scale) return false;
  out = v * scale;
  return true;
}

// A step's block layout: counts and packed displacements, in bytes.
struct Blocks {
  std::vector<size_t> counts, displs;
  size_t total = 0;
};
Blocks packed(const std::vector<size_t>& counts) {
  Blocks b{counts, std::vector<size_t>(counts.size()), 0};
  for (size_t q = 0; q < counts.size(); ++q) {
    b.displs[q] = b.total;
    b.total += counts[q];
  }
  return b;
}

// Byte j of the block rank r sends rank q at step s: what the receiver checks.
uint8_t pattern(int r, int q, size_t j, int s) {
  return static_cast<uint8_t>(r * 31 + q * 7 + static_cast<int>(j % 251) * 13 + s);
}

struct Step {
  Blocks send, recv;
};

Step stepFor(const Options& o, uint64_t tokens, int rank, int nRanks, int s) {
  const auto counts = routing(o, tokens, nRanks, s);
  std::vector<size_t> sendCounts, recvCounts;
  for (int q = 0; q < nRanks; ++q) {
    sendCounts.push_back(counts[static_cast<size_t>(rank)][static_cast<size_t>(q)] * o.tokenBytes);
    recvCounts.push_back(counts[static_cast<size_t>(q)][static_cast<size_t>(rank)] * o.tokenBytes);
  }
  return {packed(sendCounts), packed(recvCounts)};
}

}  // namespace

std::vector<std::vector<uint64_t>> routing(const Options& o, uint64_t tokens, int nRanks, int step) {
  const auto n = static_cast<size_t>(nRanks);
  std::mt19937_64 rng(o.seed * 1000003u + tokens * 7919u + static_cast<uint64_t>(step));
  // Expert popularity: the k-th most popular has weight 1 / (k+1)^zipf; the ranking moves per step.
  std::vector<size_t> rankOf(n);
  std::iota(rankOf.begin(), rankOf.end(), size_t{0});
  std::shuffle(rankOf.begin(), rankOf.end(), rng);
  std::vector<double> weights(n);
  for (size_t e = 0; e < n; ++e) weights[e] = 1.0 / std::pow(static_cast<double>(rankOf[e] + 1), o.zipf);
  std::discrete_distribution<size_t> expert(weights.begin(), weights.end());
  std::vector<std::vector<uint64_t>> counts(n, std::vector<uint64_t>(n, 0));
  for (size_t r = 0; r < n; ++r)
    for (uint64_t t = 0; t < tokens; ++t) ++counts[r][expert(rng)];
  return counts;
}

std::string usage(const std::string& program, const std::string& ranksHelp) {
  return absl::StrFormat(
      "usage: %s [flags]\n"
      "An MoE token exchange (AllToAllv of Zipf-routed tokens), timed per step, max over ranks.\n"
      "  -b,--mintokens N     tokens per rank, first row (16); K/M suffixes\n"
      "  -e,--maxtokens N     tokens per rank, last row (4096)\n"
      "  -f,--stepfactor N    multiply between rows (4)\n"
      "  --token-bytes N      bytes per token (2048: 1024 bfloat16 activations)\n"
      "  --zipf A             expert popularity exponent (1.2)\n"
      "  --steps N            distinct routings cycled per row (8)\n"
      "  -n,--iters N         timed steps per row (20)\n"
      "  -w,--warmup_iters N  untimed steps per row (8: each routing once before the clock)\n"
      "  --settle-iters N     the first row's warm-up runs at least N steps, so that the scheduler's\n"
      "                       placement of more ranks than cores settles before the clock (0: off)\n"
      "  --seed N             the routings' seed (1)\n"
      "%s"
      "  -h,--help, --version\n",
      program, ranksHelp);
}

std::string parse(const std::vector<std::string>& args, Options& o) {
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& flag = args[i];
    if (flag == "-h" || flag == "--help") {
      o.help = true;
      continue;
    }
    if (flag == "--version") {
      o.version = true;
      continue;
    }
    if (i + 1 >= args.size()) return flag + ": expected a value after it";
    const std::string& value = args[++i];
    uint64_t v = 0;
    auto size = [&](uint64_t& out, uint64_t least) -> std::string {
      if (!parseSize(value, v) || v < least)
        return absl::StrFormat("%s %s: expected a whole number of at least %d", flag, value, least);
      out = v;
      return "";
    };
    auto count = [&](int& out, int least) -> std::string {
      uint64_t got = 0;
      if (std::string e = size(got, static_cast<uint64_t>(least)); !e.empty()) return e;
      if (got > 1000000000) return flag + " " + value + ": at most 1000000000";
      out = static_cast<int>(got);
      return "";
    };
    std::string error;
    if (flag == "-g" || flag == "--ngpus") error = count(o.localRanks, 1);
    else if (flag == "-b" || flag == "--mintokens") error = size(o.minTokens, 1);
    else if (flag == "-e" || flag == "--maxtokens") error = size(o.maxTokens, 1);
    else if (flag == "-f" || flag == "--stepfactor") error = size(o.factor, 2);
    else if (flag == "--token-bytes") error = size(o.tokenBytes, 1);
    else if (flag == "--steps") error = count(o.steps, 1);
    else if (flag == "-n" || flag == "--iters") error = count(o.iters, 1);
    else if (flag == "-w" || flag == "--warmup_iters") error = count(o.warmup, 0);
    else if (flag == "--settle-iters") error = count(o.settleIters, 0);
    else if (flag == "--seed") error = size(o.seed, 0);
    else if (flag == "--zipf") {
      if (!absl::SimpleAtod(value, &o.zipf) || !(o.zipf >= 0) || o.zipf > 10)
        error = "--zipf " + value + ": expected an exponent in 0..10";
    } else {
      return flag + ": unknown flag (--help lists them)";
    }
    if (!error.empty()) return error;
  }
  if (o.minTokens > o.maxTokens) return absl::StrFormat("-b %d is more than -e %d", o.minTokens, o.maxTokens);
  return "";
}

int run(const Options& o, Exchange& exchange, int rank, int nRanks, std::ostream* out, const std::string& preamble) {
  if (out != nullptr) {
    *out << preamble
         << absl::StrFormat("# %d ranks, %d B per token, zipf %.2f, %d routings per row, -n %d -w %d, seed %d\n", nRanks,
                            o.tokenBytes, o.zipf, o.steps, o.iters, o.warmup, o.seed)
         << (o.settleIters != 0 ? absl::StrFormat("# settle iters: %d (before the first row)\n", o.settleIters) : "")
         << "#\n#  tokens/rank   bytes/rank  max block B    time(us)  algbw(GB/s)  busbw(GB/s)  #wrong\n";
  }
  bool anyWrong = false;
  for (uint64_t tokens = o.minTokens; tokens <= o.maxTokens; tokens *= o.factor) {
    std::vector<Step> steps;
    size_t sendBytes = 0, recvBytes = 0, maxBlock = 0;
    for (int s = 0; s < o.steps; ++s) {
      steps.push_back(stepFor(o, tokens, rank, nRanks, s));
      sendBytes = std::max(sendBytes, steps.back().send.total);
      recvBytes = std::max(recvBytes, steps.back().recv.total);
      for (size_t c : steps.back().send.counts) maxBlock = std::max(maxBlock, c);
    }
    exchange.prepare(tokens * o.tokenBytes);  // one rank may route every token to one expert
    uint8_t* send = exchange.buffer(0, std::max<size_t>(sendBytes, 1));
    uint8_t* recv = exchange.buffer(1, std::max<size_t>(recvBytes, 1));
    auto once = [&](int i) {
      const Step& s = steps[static_cast<size_t>(i % o.steps)];
      exchange.alltoallv(send, s.send.counts, s.send.displs, recv, s.recv.counts, s.recv.displs);
    };
    const int warmup = tokens == o.minTokens ? std::max(o.warmup, o.settleIters) : o.warmup;
    for (int i = 0; i < warmup; ++i) once(i);
    exchange.barrier();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < o.iters; ++i) once(i);
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / o.iters;
    // Every routing once more on patterned bytes, every received byte checked.
    double wrong = 0;
    for (int si = 0; si < o.steps; ++si) {
      const Step& s = steps[static_cast<size_t>(si)];
      for (int q = 0; q < nRanks; ++q)
        for (size_t j = 0; j < s.send.counts[static_cast<size_t>(q)]; ++j)
          send[s.send.displs[static_cast<size_t>(q)] + j] = pattern(rank, q, j, si);
      std::fill(recv, recv + std::max<size_t>(recvBytes, 1), uint8_t{0xA5});
      exchange.alltoallv(send, s.send.counts, s.send.displs, recv, s.recv.counts, s.recv.displs);
      for (int q = 0; q < nRanks; ++q)
        for (size_t j = 0; j < s.recv.counts[static_cast<size_t>(q)]; ++j)
          wrong += recv[s.recv.displs[static_cast<size_t>(q)] + j] != pattern(q, rank, j, si) ? 1 : 0;
    }
    const double time = exchange.max(us);
    const double totalWrong = exchange.sum(wrong);
    const double maxBlockAll = exchange.max(static_cast<double>(maxBlock));
    anyWrong = anyWrong || totalWrong != 0;
    if (out != nullptr) {
      const double bytes = static_cast<double>(tokens * o.tokenBytes);
      const double algbw = bytes / time / 1e3;
      *out << absl::StrFormat("%14d %12d %12.0f %11.2f %12.3f %12.3f %7.0f\n", tokens, tokens * o.tokenBytes,
                              maxBlockAll, time, algbw, algbw * (nRanks - 1) / nRanks, totalWrong);
    }
    if (tokens > o.maxTokens / o.factor) break;
  }
  if (out != nullptr) *out << (anyWrong ? "# FAILED: wrong bytes received\n" : "# every byte checked\n");
  return anyWrong ? kExitFailed : kExitOk;
}

}  // namespace occl::bench::moe
