// Test support: strangers at a bootstrap root's port, before the job's ranks arrive. One sends
// garbage, one speaks occl with another job's id (a rank started with a stale id), one sends part
// of a hello and then nothing (slowloris), one sends part of a hello and hangs up. The root must
// refuse each alone and name it on stderr; expectRefusedAndNamed() checks that log. The job's
// last rank must wait for waitUntilStaleRankRefused() before it joins.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "bootstrap/socket.hpp"

namespace occl::test {

class Strangers {
 public:
  // Connects the four to `id`'s root, a job of nRanks ranks.
  Strangers(const bootstrap::UniqueIdData& id, int nRanks) {
    using bootstrap::deadlineAfterMs;
    using bootstrap::Socket;
    auto garbage = Socket::connect(id.rootAddress(), deadlineAfterMs(5000));
    auto slow = Socket::connect(id.rootAddress(), deadlineAfterMs(5000));
    auto quitter = Socket::connect(id.rootAddress(), deadlineAfterMs(5000));
    if (!garbage.ok() || !slow.ok() || !quitter.ok()) {
      ADD_FAILURE() << "a stranger could not connect to the root";
      return;
    }
    const std::vector<char> junk(64, '\xab');
    EXPECT_TRUE(garbage->sendAll(junk.data(), junk.size(), deadlineAfterMs(1000)).ok());
    EXPECT_TRUE(slow->sendAll(junk.data(), 3, deadlineAfterMs(1000)).ok());
    EXPECT_TRUE(quitter->sendAll(junk.data(), 5, deadlineAfterMs(1000)).ok());
    garbageAddr_ = garbage->localAddress()->toString();
    slowAddr_ = slow->localAddress()->toString();
    quitterAddr_ = quitter->localAddress()->toString();
    garbage_ = std::move(*garbage);
    slow_ = std::move(*slow);  // open, silent, until the test ends
    bootstrap::UniqueIdData stale = id;
    stale.nonce ^= 0x5a5a;
    staleRank_ = std::thread([this, stale, nRanks] {
      staleStatus_ = bootstrap::Bootstrap::connect(stale, 1, nRanks, 10000).status();
    });
  }  // the quitter hangs up here, mid-hello
  ~Strangers() {
    if (staleRank_.joinable()) staleRank_.join();
  }

  // Returns once the root has refused the stale rank (or its 10 s ran out). A job must hold back
  // one of its ranks until then: the root reads the strangers only while its rendezvous waits,
  // and once the job has met it closes the port, so a stale rank that arrived later would find
  // the port closed instead of being refused (as it did on a loaded machine, after 10 s).
  void waitUntilStaleRankRefused() {
    if (staleRank_.joinable()) staleRank_.join();
  }
  Strangers(const Strangers&) = delete;
  Strangers& operator=(const Strangers&) = delete;

  // Once the job has met: the stale rank was refused, and the root's log names every stranger.
  void expectRefusedAndNamed(const std::string& log) {
    if (staleRank_.joinable()) staleRank_.join();
    EXPECT_EQ(staleStatus_.code, occlInvalidUsage) << staleStatus_.message;
    EXPECT_NE(staleStatus_.message.find("refused by the root"), std::string::npos) << staleStatus_.message;
    EXPECT_NE(log.find("refused the connection from " + garbageAddr_ + " sent bad magic"), std::string::npos) << log;
    EXPECT_NE(log.find("with another unique id"), std::string::npos) << log;
    EXPECT_NE(log.find("refused the connection from " + slowAddr_ + " never said hello"), std::string::npos) << log;
    EXPECT_NE(log.find("refused the connection from " + quitterAddr_ + " closed before saying hello"),
              std::string::npos)
        << log;
  }

 private:
  bootstrap::Socket garbage_, slow_;
  std::string garbageAddr_, slowAddr_, quitterAddr_;
  std::thread staleRank_;
  Status staleStatus_;
};

}  // namespace occl::test
