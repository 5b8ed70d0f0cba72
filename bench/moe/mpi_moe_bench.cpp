// mpi-moe-bench: the MoE token exchange (moe.hpp) on MPI_Alltoallv (bytes), one rank per process:
//   mpirun -np 8 mpi-moe-bench
// MPI picks its own algorithm and transport (Open MPI: coll/tuned, or coll/basic's linear
// exchange, over pml ob1 and the vader shared-memory BTL); the preamble names the library.
#include <mpi.h>

#include <climits>
#include <filesystem>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/flags.hpp"
#include "moe.hpp"
#include "mpi_ranks.hpp"

namespace {

using namespace occl::bench;
using namespace occl::bench::moe;

std::vector<int> ints(const std::vector<size_t>& v) {
  std::vector<int> out;
  for (size_t x : v) {
    if (x > static_cast<size_t>(INT_MAX)) throw std::runtime_error("a block past MPI's int counts");
    out.push_back(static_cast<int>(x));
  }
  return out;
}

class Mpi final : public Exchange {
 public:
  void alltoallv(const uint8_t* send, const std::vector<size_t>& sendCounts, const std::vector<size_t>& sendDispls,
                 uint8_t* recv, const std::vector<size_t>& recvCounts, const std::vector<size_t>& recvDispls) override {
    const std::vector<int> sc = ints(sendCounts), sd = ints(sendDispls), rc = ints(recvCounts), rd = ints(recvDispls);
    MPI_Alltoallv(send, sc.data(), sd.data(), MPI_BYTE, recv, rc.data(), rd.data(), MPI_BYTE, MPI_COMM_WORLD);
  }
  void barrier() override { MPI_Barrier(MPI_COMM_WORLD); }
  double max(double value) override { return mpi_ranks::reduce(value, MPI_MAX); }
  double sum(double value) override { return mpi_ranks::reduce(value, MPI_SUM); }
};

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, nRanks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nRanks);
  const std::vector<std::string> args(argv, argv + argc);
  const std::string program = std::filesystem::path(args[0]).filename().string();
  Options o;
  std::string error = parse(args, o);
  if (error.empty() && o.localRanks != 1) error = "-g/--ngpus: expected 1 (mpirun -np N starts the ranks)";
  int code = kExitOk;
  if (!error.empty()) {
    if (rank == 0) std::cerr << program << ": " << error << "\n";
    code = kExitUsage;
  } else if (o.help) {
    if (rank == 0) std::cout << usage(program, "  ranks: mpirun -np N " + program + " ...\n");
  } else if (o.version) {
    if (rank == 0) std::cout << occl::cli::versionLine(program) << "\n";
  } else {
    Mpi mpi;
    code = run(o, mpi, rank, nRanks, rank == 0 ? &std::cout : nullptr,
               "# mpi-moe-bench: " + mpi_ranks::libraryName() + ", MPI_Alltoallv, " + std::to_string(nRanks) +
                   " rank(s) as processes\n");
  }
  MPI_Finalize();
  return code;
}
