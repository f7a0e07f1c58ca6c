// A rank of a multi-process job for the `mp` tests: reads its configuration
// from the environment (as set by `chorus launch`, torchrun or mpirun), joins
// the bootstrap and checks an all-gather of every rank's id. Exit 0 only if
// everything it saw is right. It says how long joining, the all-gather and
// a barrier took, and whether it joined in the tree or the star.
#include <chrono>
#include <cstdio>
#include <string>

#include "runtime/bootstrap/bootstrap.h"

int main() {
  using namespace chorus::runtime;
  auto cfg = bootstrapConfigFromEnvironment();
  if (!cfg.isOk()) {
    std::fprintf(stderr, "probe: %s\n", cfg.status().message().c_str());
    return 1;
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto b = Bootstrap::connect(cfg.value());
  if (!b.isOk()) {
    std::fprintf(stderr, "probe rank %d: %s\n", cfg.value().rank, b.status().message().c_str());
    return 1;
  }
  auto all = b.value()->allGather("rank" + std::to_string(cfg.value().rank));
  if (!all.isOk()) {
    std::fprintf(stderr, "probe: %s\n", all.status().message().c_str());
    return 1;
  }
  for (int r = 0; r < cfg.value().nranks; ++r) {
    if (all.value()[static_cast<size_t>(r)] != "rank" + std::to_string(r)) {
      std::fprintf(stderr, "probe: entry %d is '%s'\n", r,
                   all.value()[static_cast<size_t>(r)].c_str());
      return 1;
    }
    if (b.value()->hosts()[static_cast<size_t>(r)] != hostIdentity()) return 1;
  }
  if (!b.value()->barrier().isOk()) return 1;
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("rank %d of %d: bootstrap ok (%s, %.1f ms), all ranks on this host\n",
              cfg.value().rank, cfg.value().nranks, b.value()->tree() ? "tree" : "star", ms);
  return 0;
}
