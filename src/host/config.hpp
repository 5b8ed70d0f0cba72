// Configuration: built-in defaults, the OCCL_* environment variables that override them, and
// validation. This file and config.cpp are the one place where occl reads its environment
// (besides the launcher variables of launcher_env.hpp); docs/configuration.md lists the same.
#pragma once

#include "host/status.hpp"
#include "occl/occl.h"

namespace occl::host {

// Defaults, then OCCL_* overrides. A malformed variable is an error naming it.
Status initConfig(occlConfig_t& config);
// Checks every field; the message names the field and the accepted range.
Status validateConfig(const occlConfig_t& config);

}  // namespace occl::host
