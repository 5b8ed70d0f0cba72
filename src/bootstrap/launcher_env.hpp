// Rank, size and rendezvous address from the environment a launcher sets, for
// occlCommInitFromEnv. Supported: mpirun (Open MPI) and torchrun; the address comes from
// OCCL_COMM_ID ("host:port", "[v6addr]:port") or MASTER_ADDR/MASTER_PORT.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "util/status.hpp"

namespace occl::bootstrap {

struct LauncherEnv {
  int rank = -1;
  int size = 0;
  std::string addr;        // rank 0's host: a name or a numeric address, IPv6 without brackets
  int port = 0;
  std::string source;      // who gave rank and size: "mpirun" or "torchrun"
  std::string addrSource;  // who gave the address: "OCCL_COMM_ID", "MASTER_ADDR/MASTER_PORT",
                           // or "OMPI_MCA_ess_base_jobid" (single-node port derived from the job)
  uint64_t jobSeed = 0;    // equal on all ranks of one job: the nonceSeed for uniqueIdFromAddress
};

// Rank and size from OMPI_COMM_WORLD_RANK/SIZE, else RANK/WORLD_SIZE. Address from OCCL_COMM_ID,
// else MASTER_ADDR/MASTER_PORT; under mpirun with neither, 127.0.0.1 and a port in
// 20000..29999 derived from OMPI_MCA_ess_base_jobid (all ranks on one node). Empty variables
// count as unset. Errors (occlInvalidArgument) name the variable and its bad value, or the
// variables to set.
Result<LauncherEnv> detectLauncherEnv();

// True when a launcher started this process as one rank of a job: OMPI_COMM_WORLD_SIZE (mpirun)
// or WORLD_SIZE (torchrun) is set and not empty.
bool launcherSetsRanks();

// OMPI_COMM_WORLD_LOCAL_RANK, else LOCAL_RANK; -1 if neither holds a non-negative integer.
int localRankFromEnv();

// What makes ranks "on one host" (they share memory and take the shm connector): OCCL_HOSTID
// when set (NCCL_HOSTID's role), else the host name, the kernel's boot id and this process's
// network namespace, so that namespaces of one machine count as hosts (tests/net).
std::string hostIdentity();
// The inode of this process's pid namespace (0 if /proc says nothing): processes of one host reach
// each other's occlMemAlloc memory only within one (memory/shared_buffers.hpp).
uint64_t pidNamespace();
// The device of the file system where shm_open makes this process's segments (/dev/shm; 0 if
// there is none): processes of one host whose /dev/shm differ (containers with one of their own,
// on the host's network) cannot meet there, and take the network instead.
uint64_t shmDevice();

// "host:port" or "[v6addr]:port"; `variable` names the value's origin in error messages.
Result<std::pair<std::string, int>> parseHostPort(const std::string& variable, const std::string& value);

}  // namespace occl::bootstrap
