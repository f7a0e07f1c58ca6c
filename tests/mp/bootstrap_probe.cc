// A rank of a multi-process job for the `mp` tests: reads its configuration
// from the environment (as set by `chorus launch`, torchrun or mpirun), joins
// the bootstrap and checks an all-gather of every rank's id. Exit 0 only if
// everything it saw is right.
#include <cstdio>
#include <string>

#include "runtime/bootstrap.h"

int main() {
  using namespace chorus::runtime;
  auto cfg = bootstrapConfigFromEnvironment();
  if (!cfg.isOk()) {
    std::fprintf(stderr, "probe: %s\n", cfg.status().message().c_str());
    return 1;
  }
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
  std::printf("rank %d of %d: bootstrap ok, all ranks on this host\n", cfg.value().rank,
              cfg.value().nranks);
  return 0;
}
