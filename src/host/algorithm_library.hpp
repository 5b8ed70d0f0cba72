// The MSCCL-IR programs a communicator knows: loaded by name (occlAlgorithmLoad) or, the first
// time a registration names a file, by path. Programs are immutable once loaded and shared with
// the registrations that run them.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "ir_loader/program.hpp"
#include "util/status.hpp"

namespace occl::host {

class AlgorithmLibrary {
 public:
  // Loads and validates the file at `path` under `name`, replacing what that name held before
  // (registrations that already run it keep their copy). "ring" names the built-in algorithms.
  Status load(const std::string& name, const std::string& path);

  // The program loaded under `nameOrPath`, else the file at that path, loaded once and kept.
  Result<std::shared_ptr<const ir::Program>> find(const std::string& nameOrPath);

 private:
  static Result<std::shared_ptr<const ir::Program>> loadFile(const std::string& path);

  std::mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<const ir::Program>> byName_;
  absl::flat_hash_map<std::string, std::shared_ptr<const ir::Program>> byPath_;
};

}  // namespace occl::host
