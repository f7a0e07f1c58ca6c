// The C++ language from an installed Chorus: a ring allgather written as
// chunk journeys, compiled and proven by chorus::generate, then run through
// the C API on 4 thread ranks with checked data.
#include <chorus/chorus.hpp>
#include <chorus/gen.hpp>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  const int n = 4;
  namespace L = chorus::lang;
  L::Program p({.name = "consumer_ring_allgather", .collective = "allgather", .ranks = n});
  for (int r = 0; r < n; ++r) {
    L::Chunk c = p.chunk(r, L::kInput, 0);
    c = c.copy(r, L::kOutput, r);
    for (int step = 1; step < n; ++step) c = c.copy((r + step) % n, L::kOutput, r);
  }
  chorus::Generated g = chorus::generate(p);
  if (!g.ok) {
    std::fprintf(stderr, "consumer_lang: %s", g.diagnostics.c_str());
    return 1;
  }
  const std::string path = argc > 1 ? argv[1] : "consumer_ring_allgather.xml";
  std::ofstream(path) << g.xml;
  chorusAlgoHandle_t algo = 0;
  if (chorus::ApiResult r = chorus::check(chorusLoadAlgo(path.c_str(), &algo, 0)); !r.ok()) {
    std::fprintf(stderr, "consumer_lang: %s\n", r.message.c_str());
    return 1;
  }
  std::vector<chorus::Comm> comms;
  if (chorus::ApiResult r = chorus::Comm::initAll(n, &comms); !r.ok()) {
    std::fprintf(stderr, "consumer_lang: %s\n", r.message.c_str());
    return 1;
  }
  const size_t count = 256;  // per rank
  std::vector<std::vector<int>> send(n, std::vector<int>(count)),
      recv(n, std::vector<int>(count * n, -1));
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i) send[r][i] = r * 100000 + static_cast<int>(i);
  std::vector<std::thread> threads;
  std::vector<chorus::ApiResult> results(n);
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      results[r] =
          comms[r].runAlgo(algo, send[r].data(), recv[r].data(), count, chorusInt32, chorusSum);
    });
  for (auto& t : threads) t.join();
  int wrong = 0;
  for (int r = 0; r < n; ++r) {
    if (!results[r].ok()) {
      std::fprintf(stderr, "consumer_lang: rank %d: %s\n", r, results[r].message.c_str());
      return 1;
    }
    for (int from = 0; from < n; ++from)
      for (size_t i = 0; i < count; ++i)
        if (recv[r][from * count + i] != from * 100000 + static_cast<int>(i)) ++wrong;
  }
  chorusUnloadAlgo(algo);
  std::printf("consumer_lang: generated, verified and ran a %d-rank allgather, %d wrong\n", n,
              wrong);
  return wrong == 0 ? 0 : 1;
}
