// Test support: ranks as processes. A child is this test binary re-executed (posix_spawn of its
// own path) with --gtest_filter naming a hidden (DISABLED_) child entry, and variables naming
// its scenario and rank. Re-exec rather than fork: a forked child of a multithreaded process
// inherits every lock another thread held at fork time (malloc's, gtest's, a leftover occl
// thread's) and may deadlock on it; a re-executed child starts from a fresh image.
//
// The parent never blocks without a bound: reap() polls waitpid until a deadline, then SIGKILLs
// the stragglers and fails the test.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace occl::test::proc {

using Env = std::map<std::string, std::string>;

// The path of this executable: a child started through another program (`ip netns exec`) cannot
// use /proc/self/exe, which would name that program.
inline std::string selfExe() {
  char path[4096] = {};
  const ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  return n > 0 ? std::string(path, static_cast<size_t>(n)) : std::string("/proc/self/exe");
}

// The path of program `name` on this process's PATH, or "" when none is executable.
inline std::string findProgram(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
  for (size_t at = 0; at <= dirs.size();) {
    const size_t end = std::min(dirs.find(':', at), dirs.size());
    const std::string candidate = (end > at ? dirs.substr(at, end - at) : std::string(".")) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    at = end + 1;
  }
  return "";
}

// This process's environment minus what would steer a child's launcher detection or scenario
// (launcher variables, OCCL_MP_* and OCCL_MH_*), plus `extra`.
inline std::vector<std::string> childEnvironment(const Env& extra) {
  std::vector<std::string> out;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv(*e);
    std::string key = kv.substr(0, kv.find('='));
    if (key.rfind("OMPI_", 0) == 0 || key.rfind("OCCL_MP_", 0) == 0 || key.rfind("OCCL_MH_", 0) == 0 ||
        key == "OCCL_COMM_ID" || key == "RANK" || key == "WORLD_SIZE" || key == "LOCAL_RANK" ||
        key == "MASTER_ADDR" || key == "MASTER_PORT" || extra.contains(key))
      continue;
    out.push_back(kv);
  }
  for (const auto& [k, v] : extra) out.push_back(k + "=" + v);
  return out;
}

// Starts the program `args` (args[0] a path) with this process's environment as childEnvironment
// filters it plus `extra`; its stdout and stderr go to `outPath` unless that is empty. Returns -1
// on failure.
inline pid_t spawnProgram(std::vector<std::string> args, const Env& extra, const std::string& outPath = "") {
  std::vector<std::string> env = childEnvironment(extra);
  std::vector<char*> envp;
  for (auto& kv : env) envp.push_back(kv.data());
  envp.push_back(nullptr);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (!outPath.empty()) {
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, outPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  }
  pid_t pid = -1;
  const int err = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (err != 0) ADD_FAILURE() << "posix_spawn " << argv[0] << ": " << std::strerror(err);
  return err == 0 ? pid : -1;
}

// Starts `prefix` (e.g. {"/usr/sbin/ip", "netns", "exec", "ns"}; empty: nothing) followed by this
// binary running only the gtest test `entry` ("Suite.DISABLED_Name"). Returns -1 on failure.
inline pid_t spawn(const std::string& entry, const Env& extra, const std::vector<std::string>& prefix = {}) {
  std::vector<std::string> args = prefix;
  for (std::string a : {selfExe(), "--gtest_filter=" + entry, std::string("--gtest_also_run_disabled_tests"),
                        std::string("--gtest_brief=1")})
    args.push_back(a);
  return spawnProgram(std::move(args), extra);
}

// Waits for every child until `timeout`; kills the rest. Returns exit codes (-1: killed/crashed,
// or never started).
inline std::vector<int> reap(const std::vector<pid_t>& pids, std::chrono::seconds timeout) {
  std::vector<int> codes(pids.size(), -1);
  std::vector<bool> done(pids.size(), false);
  size_t remaining = pids.size();
  for (size_t i = 0; i < pids.size(); ++i) {
    if (pids[i] > 0) continue;
    done[i] = true;
    --remaining;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (remaining > 0 && std::chrono::steady_clock::now() < deadline) {
    for (size_t i = 0; i < pids.size(); ++i) {
      int status = 0;
      if (done[i] || waitpid(pids[i], &status, WNOHANG) != pids[i]) continue;
      done[i] = true;
      --remaining;
      codes[i] = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (size_t i = 0; i < pids.size(); ++i) {
    if (done[i]) continue;
    ADD_FAILURE() << "child " << i << " did not finish within " << timeout.count() << " s: killed";
    kill(pids[i], SIGKILL);
    waitpid(pids[i], nullptr, 0);
  }
  return codes;
}

}  // namespace occl::test::proc
