// Consumer of the installed occl.hpp: RAII communicators and a future, one AllReduce on 2 ranks.
#include <occl/occl.hpp>

#include <chrono>
#include <cstdio>
#include <vector>

int main() {
  try {
    // Declared before the communicators, so the buffers outlive them (their destructors wait).
    std::vector<std::vector<float>> bufs{std::vector<float>(256, 1.0f), std::vector<float>(256, 2.0f)};
    occlConfig_t config = occl::defaultConfig();
    config.collTimeoutMs = 60000;
    std::vector<occl::Comm> comms = occl::Comm::all(2, &config);
    occlCollDesc_t d;
    occl::check(occlCollDescInit(&d));
    d.type = occlCollAllReduce;
    d.count = 256;
    d.datatype = occlFloat32;
    d.op = occlMax;
    std::vector<std::future<occlResult_t>> done;
    for (size_t r = 0; r < comms.size(); ++r) {
      comms[r].registerCollective(3, d);
      done.push_back(comms[r].submit(3, bufs[r].data(), bufs[r].data()));
    }
    bool good = true;
    for (size_t r = 0; r < done.size(); ++r) {
      good &= done[r].wait_for(std::chrono::seconds(60)) == std::future_status::ready && done[r].get() == occlSuccess;
      for (float v : bufs[r]) good &= v == 2.0f;
    }
    std::printf("consumer_hpp: AllReduce max on 2 ranks: %s\n", good ? "OK" : "WRONG");
    return good ? 0 : 1;
  } catch (const occl::Error& e) {
    std::fprintf(stderr, "consumer_hpp: %s\n", e.what());
    return 1;
  }
}
