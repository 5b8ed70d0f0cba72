// Configuration: built-in defaults, the OCCL_* environment variables that override them, and
// validation. This file and config.cpp are where occl reads its environment, besides three
// readers that run before or without a configuration: the launcher variables of
// launcher_env.hpp, OCCL_SOCKET_IFNAME, which bootstrap/socket.cpp reads where it picks the
// address to listen on (occlGetUniqueId has no config to carry it), and OCCL_DEBUG* (util/log.cpp,
// read once by the first log line). config.cpp's kOtherVariables names them so that an unknown
// OCCL_* variable can be told apart; docs/configuration.md lists them all.
#pragma once

#include <cstddef>
#include <string_view>

#include "occl/occl.h"
#include "util/status.hpp"

namespace occl::host {

// Defaults, then OCCL_* overrides. A malformed variable is an error naming it.
Status initConfig(occlConfig_t& config);
// occlConfigSetField: the field named as occlConfig_t names it ("sqDepth"), from text as its
// OCCL_* variable takes it (a decimal, 0/1, or a word of its choices or the enum's value).
Status setConfigField(occlConfig_t& config, std::string_view field, const char* text);
// connectorSlotBytes = 0 ("auto") becomes one of these when a communicator is created. A NET
// slot is one UCX message: over TCP on the 2-core machine, 1 MiB slots moved 32 MiB AllReduces
// across two hosts at ~0.55 GB/s busbw where 128 KiB ones managed ~0.35 (bench/results/
// net_allreduce.md); within a host the smaller tile keeps a collective's pipeline deep. Every
// rank of a communicator resolves it alike: whether it spans hosts, and whether any rank is a
// CUDA rank, is known to all of them. A tile costs the CUDA daemon a few microseconds beyond its
// data (H200, bench/results/gpu-2026-11-27.md), so with any CUDA rank slots are 1 MiB: AllReduce
// on 4 ranks of one GPU took 2.7 ms at 32 MiB against 5.4 with 128 KiB, 182 us at 2 MiB against
// 442, the same below 1 MiB; one rank 1.0 ms against 2.2 at 32 MiB (both with the SQ looked at
// every 8th tile; now once per MiB, so before every 1 MiB tile: host/comm.cpp).
inline constexpr size_t kSlotBytesOneHost = size_t{128} * 1024;
inline constexpr size_t kSlotBytesAcrossHosts = size_t{1024} * 1024;
inline constexpr size_t kSlotBytesGpu = size_t{1024} * 1024;
// Records per daemon block of the timeline (config.timelineDepth): 4 MiB of daemon memory a block.
inline constexpr int kMaxTimelineDepth = 65536;
void resolveConnectorGeometry(occlConfig_t& config, bool spansHosts, bool anyCudaRank);

// Slots of one connector: config.connectorSlots is 2..this, and a program that needs more than
// config gives (Program::minConnectorSlots) gets up to this many.
inline constexpr int kMaxConnectorSlots = 1024;

// Checks every field; the message names the field and the accepted range.
Status validateConfig(const occlConfig_t& config);

// config.backend's name as OCCL_BACKEND spells it ("auto", "host", "cuda", "simt"), "?" if none.
const char* backendName(int backend);

}  // namespace occl::host
