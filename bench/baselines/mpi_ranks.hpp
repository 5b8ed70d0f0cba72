// What the MPI baselines (mpi-allreduce-bench, mpi-moe-bench) share: the library's name for the
// preamble, and the max or sum of one double that ranks agree on.
#pragma once

#include <mpi.h>

#include <string>

namespace occl::bench::mpi_ranks {

// The first line of MPI_Get_library_version ("Open MPI v4.1.4, package: ..." up to the comma).
inline std::string libraryName() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(text, &length);
  const std::string version(text, static_cast<size_t>(length));
  return version.substr(0, version.find_first_of(",\n"));
}

inline double reduce(double value, MPI_Op op) {
  double result = 0;
  MPI_Allreduce(&value, &result, 1, MPI_DOUBLE, op, MPI_COMM_WORLD);
  return result;
}

}  // namespace occl::bench::mpi_ranks
