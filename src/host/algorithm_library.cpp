#include "host/algorithm_library.hpp"

#include "absl/strings/str_format.h"
#include "ir_loader/fingerprint.hpp"
#include "ir_loader/msccl_ir.hpp"
#include "ir_loader/validate.hpp"
#include "util/log.hpp"

namespace occl::host {

namespace {
KnownProgram known(ir::Program program) {
  auto shared = std::make_shared<const ir::Program>(std::move(program));
  return KnownProgram{shared, ir::fingerprint(*shared)};
}
}  // namespace

Result<KnownProgram> AlgorithmLibrary::loadFile(const std::string& path) {
  ir::LoadResult loaded = ir::loadMscclIrFile(path);
  if (!loaded.ok()) return Status::error(occlInvalidArgument, ir::formatErrors(loaded.errors, path));
  // Once per file: a loaded program is cached by name and path.
  for (const ir::LoadError& w : loaded.warnings) logWarning(path + ": " + ir::formatError(w));
  return known(std::move(*loaded.program));
}

Status AlgorithmLibrary::load(const std::string& name, const std::string& path) {
  if (name.empty() || name == "ring")
    return Status::error(occlInvalidArgument,
                         absl::StrFormat("name \"%s\": expected a non-empty name other than \"ring\" (the built-in "
                                         "algorithms)", name));
  Result<KnownProgram> program = loadFile(path);
  if (!program.ok()) return program.status();
  std::lock_guard<std::mutex> lock(mu_);
  byName_[name] = program.value();
  return Status::success();
}

Result<KnownProgram> AlgorithmLibrary::find(const std::string& nameOrPath) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = byName_.find(nameOrPath); it != byName_.end()) return it->second;
    if (auto it = byPath_.find(nameOrPath); it != byPath_.end()) return it->second;
  }
  Result<KnownProgram> program = loadFile(nameOrPath);
  if (!program.ok())
    return program.status().withContext(
        absl::StrFormat("desc.algorithm = \"%s\" is no name given to occlAlgorithmLoad, and as a file", nameOrPath));
  std::lock_guard<std::mutex> lock(mu_);
  return byPath_.try_emplace(nameOrPath, program.value()).first->second;
}

KnownProgram AlgorithmLibrary::builtIn(const BuiltInKey& key, const std::function<ir::Program()>& make) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = builtIn_.find(key); it != builtIn_.end()) return it->second;
  }
  KnownProgram made = known(make());
  size_t steps = 0;
  for (const ir::RankProgram& r : made.program->ranks)
    for (const ir::BlockProgram& b : r.blocks) steps += b.steps.size();
  if (steps > kMaxKeptSteps) return made;
  std::lock_guard<std::mutex> lock(mu_);
  if (builtIn_.size() >= kMaxBuiltIns && !builtIn_.contains(key)) builtIn_.clear();
  return builtIn_.try_emplace(key, std::move(made)).first->second;
}

}  // namespace occl::host
