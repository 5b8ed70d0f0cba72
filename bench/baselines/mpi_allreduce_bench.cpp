// mpi-allreduce-bench: MPI_Allreduce (float sum), measured and printed as occl-bench measures and
// prints occl's AllReduce (see baseline.hpp), one rank per process:
//   mpirun -np 4 mpi-allreduce-bench -b 8 -e 64M -f 2 -n 20 -w 5
// The in-place columns pass MPI_IN_PLACE. MPI picks its own algorithm and transport (Open MPI 4.1
// on one machine: coll/tuned over pml ob1 and the vader shared-memory BTL, with CMA single-copy
// for large messages); the preamble names the library.
#include <mpi.h>

#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "baseline.hpp"
#include "mpi_ranks.hpp"

namespace {

using namespace occl::bench;
using namespace occl::bench::baseline;

class Mpi final : public Library {
 public:
  void allreduce(const float* send, float* recv, size_t count) override {
    const void* input = send == recv ? MPI_IN_PLACE : send;
    MPI_Allreduce(input, recv, static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  }
  void barrier() override { MPI_Barrier(MPI_COMM_WORLD); }
  double max(double value) override { return mpi_ranks::reduce(value, MPI_MAX); }
  double sum(double value) override { return mpi_ranks::reduce(value, MPI_SUM); }
};

std::string preamble(const Options& o, int nRanks) {
  return "# mpi-allreduce-bench: " + mpi_ranks::libraryName() + ", " + std::to_string(nRanks) +
         " rank(s) as processes, MPI_Allreduce float sum (in place: MPI_IN_PLACE)\n" + sweepLine(o);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, nRanks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nRanks);
  const std::vector<std::string> args(argv, argv + argc);
  const std::string program = std::filesystem::path(args[0]).filename().string();
  Options options;
  std::string error = parse(args, options);
  if (error.empty() && options.localRanks != 1) error = "-g/--ngpus: expected 1 (mpirun -np N starts the ranks)";
  int code = kExitOk;
  // Every rank parsed the same arguments, so all take the same branch; rank 0 speaks.
  if (!error.empty()) {
    if (rank == 0) std::cerr << program << ": " << error << "\n";
    code = kExitUsage;
  } else if (options.help) {
    if (rank == 0) std::cout << usage(program, "  ranks: mpirun -np N " + program + " ...\n");
  } else if (options.version) {
    if (rank == 0) std::cout << occl::cli::versionLine(program) << "\n";
  } else {
    Mpi mpi;
    code = runSweep(options, mpi, rank, nRanks, rank == 0 ? &std::cout : nullptr, preamble(options, nRanks));
  }
  MPI_Finalize();
  return code;
}
