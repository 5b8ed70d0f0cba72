// The programs a communicator knows: MSCCL-IR programs loaded by name (occlAlgorithmLoad) or,
// the first time a registration names a file, by path; and the built-in programs registrations
// have run, made once each. Programs are immutable once made and shared with the registrations
// that run them, each with its fingerprint (part of every registration's signature).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "ir_loader/program.hpp"
#include "util/status.hpp"

namespace occl::host {

struct KnownProgram {
  std::shared_ptr<const ir::Program> program;
  uint64_t fingerprint;  // ir::fingerprint(*program)
};

// What a built-in program is made from: its generator and the generator's arguments
// (algorithms.cpp). Equal keys make equal programs.
using BuiltInKey = std::array<int32_t, 5>;

class AlgorithmLibrary {
 public:
  // Loads and validates the file at `path` under `name`, replacing what that name held before
  // (registrations that already run it keep their copy). "ring" names the built-in algorithms.
  Status load(const std::string& name, const std::string& path);

  // The program loaded under `nameOrPath`, else the file at that path, loaded once and kept.
  Result<KnownProgram> find(const std::string& nameOrPath);

  // The built-in program of `key`, made by `make` the first time. A registration of a one-element
  // AllReduce spent an eighth of its time making and hashing its program anew (2 processes,
  // bench/results/registration-2026-11-27.md). Kept: up to kMaxBuiltIns programs of up to
  // kMaxKeptSteps steps each (a program holds every rank's steps, so a ring of a thousand ranks
  // has millions); past the count the kept ones are dropped, larger ones are made every time.
  KnownProgram builtIn(const BuiltInKey& key, const std::function<ir::Program()>& make);
  static constexpr size_t kMaxBuiltIns = 64;
  static constexpr size_t kMaxKeptSteps = size_t{1} << 16;

 private:
  static Result<KnownProgram> loadFile(const std::string& path);

  std::mutex mu_;
  absl::flat_hash_map<std::string, KnownProgram> byName_;
  absl::flat_hash_map<std::string, KnownProgram> byPath_;
  absl::flat_hash_map<BuiltInKey, KnownProgram> builtIn_;
};

}  // namespace occl::host
