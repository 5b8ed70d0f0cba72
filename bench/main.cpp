// occl-bench: nccl-tests-compatible benchmark of occl's collectives. See README.md.
#include <iostream>
#include <string>
#include <vector>

#include "bench.hpp"

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv, argv + argc);
  return occl::bench::benchMain(args, std::cout, std::cerr);
}
