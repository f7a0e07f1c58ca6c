// libFuzzer target for what Chorus reads from the environment and from a
// unique id's text: the input's NUL-separated fields become the variables
// below (an empty field unsets one), then the bootstrap's and the
// communicator's settings are read, and the last field is decoded as a
// unique id. No crash, no sanitizer report; what is accepted is in range.
#include <stdlib.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "api/world.h"
#include "runtime/bootstrap/bootstrap.h"

namespace {

constexpr const char* kVariables[] = {
    "CHORUS_RANK",        "CHORUS_WORLD_SIZE",    "RANK",
    "WORLD_SIZE",         "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
    "CHORUS_ROOT",        "MASTER_ADDR",          "MASTER_PORT",
    "CHORUS_SECRET",      "CHORUS_TIMEOUT_S",     "CHORUS_SLICE_BYTES",
    "CHORUS_TRANSPORT",   "CHORUS_JOB_ID",        "CHORUS_CMA",
    "CHORUS_TCP_SOCKETS", "CHORUS_SPIN_US",       "SLURM_PROCID",
    "SLURM_NTASKS",       "SLURM_STEP_NUM_TASKS", "SLURM_STEP_NODELIST",
    "SLURM_JOB_ID",       "SLURM_STEP_ID",
};

void fail(const char* what) {
  std::fprintf(stderr, "accepted out of range: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> fields(1);
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0)
      fields.emplace_back();
    else
      fields.back().push_back(static_cast<char>(data[i]));
  }
  size_t i = 0;
  for (const char* name : kVariables) {
    if (i < fields.size() && !fields[i].empty())
      ::setenv(name, fields[i].c_str(), 1);
    else
      ::unsetenv(name);
    ++i;
  }
  auto c = chorus::runtime::bootstrapConfigFromEnvironment();
  if (c.isOk()) {
    const auto& v = c.value();
    if (v.nranks < 1 || v.rank < 0 || v.rank >= v.nranks) fail("rank");
    if (v.rootPort < 0 || v.rootPort > 65535) fail("port");
    if (v.rootHost.empty()) fail("root host");
    if (v.timeoutMs <= 0) fail("timeout");
  }
  chorus::api::WorldOptions o = chorus::api::WorldOptions::fromEnvironment();
  if (o.timeoutMs < 0) fail("CHORUS_TIMEOUT_S");
  if (o.spinUs < -1 || o.spinUs > 1000000) fail("CHORUS_SPIN_US");
  auto id = chorus::runtime::decodeRootId(fields.back());
  if (id.isOk() && (id.value().rootPort < 0 || id.value().rootPort > 65535)) fail("unique id port");
  return 0;
}
