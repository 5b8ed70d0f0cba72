// The fingerprint of a Program: ranks that register one collective compare fingerprints, so a file
// loaded under the same name but with other contents on another rank is caught.
#pragma once

#include <cstdint>

#include "ir_loader/program.hpp"

namespace occl::ir {

// Everything that changes what a Program does on any rank: collective, geometry, placements and
// every block and step (source lines excluded).
uint64_t fingerprint(const Program& p);

}  // namespace occl::ir
