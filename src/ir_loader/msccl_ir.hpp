// MSCCL-IR XML (the MSCCLang compiler's output, "old format": <algo>/<gpu>/<tb>/<step>) -> Program.
// Loading never trusts the file: every attribute is parsed strictly and range-checked, then the
// whole program goes through validateProgram(). Any bytes give either a Program that is safe to
// run or a list of errors naming line and element; never a crash or a hang.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir_loader/program.hpp"
#include "ir_loader/validate.hpp"
#include "util/status.hpp"

namespace occl::ir {

// Files larger than this are refused before parsing: real programs are a few hundred KiB.
inline constexpr size_t kMaxIrFileBytes = 64u << 20;

struct LoadResult {
  std::optional<Program> program;  // set exactly when errors is empty
  std::vector<LoadError> errors;   // at most kMaxErrors (+1 note that more were dropped)
  // What a valid program has that occl ignores, as MSCCL does: unknown attributes (one warning per
  // element kind and name). The caller shows them (formatErrors); never silently dropped.
  std::vector<LoadError> warnings;

  bool ok() const { return program.has_value(); }
};

LoadResult loadMscclIrFile(const std::string& path);
// `sourceName` only labels the program when the XML has no name; errors carry no file name.
LoadResult loadMscclIrString(std::string_view xml, std::string_view sourceName);

// `p` as MSCCL-IR XML in the MSCCLang compiler's layout, which loadMscclIrString() reads back as
// the same steps (occl-ir emit). Refused with a message: an invalid program, a point-to-point one
// (MSCCL-IR describes collectives), and a block with more than one send or receive peer (an
// MSCCL-IR threadblock names one of each). Ragged chunks are not kept: the loaded program splits
// only counts that divide into whole chunks, as every MSCCL-IR program does.
Result<std::string> writeMscclIr(const Program& p);

}  // namespace occl::ir
