#include "tests/support/collective_check.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "runtime/exec/check.h"
#include "runtime/exec/engine_host.h"
#include "tests/support/files.h"

namespace chorus::testing {

using runtime::CallArgs;
using runtime::ThreadedOptions;
using runtime::VerifiedAlgorithm;

std::shared_ptr<const VerifiedAlgorithm> load(const std::string& path) {
  auto va = VerifiedAlgorithm::make(mustRead(path));
  EXPECT_TRUE(va.isOk()) << va.status().toString();
  return va.isOk() ? va.value() : nullptr;
}

void runAndCheck(const VerifiedAlgorithm& va, const Case& c) {
  auto data = runtime::CollectiveData::make(va, c.count, c.type, c.op, c.inplace, c.spec);
  ASSERT_TRUE(data.isOk()) << data.status().toString();
  ThreadedOptions threaded;
  threaded.sliceBytes = c.options.sliceBytes;
  threaded.slots = c.options.slots;
  const auto& calls = data.value().calls();
  Status st;
  if (c.engineThreads > 0) {
    runtime::PlanRunOptions eo;
    eo.threads = c.engineThreads;
    eo.protocol = c.protocol;
    eo.sliceBytes = c.options.sliceBytes;
    eo.slots = c.options.slots;
    eo.instances = c.instances;
    eo.teamThreads = c.team;
    auto world = runtime::PlanWorld::make(va, eo);
    ASSERT_TRUE(world.isOk()) << world.status().toString();
    st = world.value()->run(calls);
  } else {
    st = c.threaded ? runThreaded(va, calls, threaded) : runDeterministic(va, calls, c.options);
  }
  ASSERT_TRUE(st.isOk()) << st.toString();
  std::string first;
  size_t wrong = data.value().countWrong(&first);
  EXPECT_EQ(wrong, 0u) << va.algo().name << " (" << dataTypeName(c.type) << " "
                       << reduceOpName(c.op) << ", count " << c.count << "): " << first;
}

size_t unitCount(const ir::Algorithm& a) { return runtime::countQuantum(a); }

void runOnEngineEveryWay(const VerifiedAlgorithm& va, const verify::PostCondition* spec,
                         int threads, int slots, int instances) {
  std::vector<bool> forms;
  if (va.algo().outofplace) forms.push_back(false);
  if (va.algo().inplace) forms.push_back(true);
  for (bool inplace : forms)
    for (ir::Protocol protocol : {ir::Protocol::kSimple, ir::Protocol::kLL, ir::Protocol::kLL128})
      for (size_t slice : {size_t{4}, size_t{0}}) {
        SCOPED_TRACE(std::string(inplace ? "in place " : "out of place ") +
                     std::string(ir::protocolName(protocol)) + " slice " + std::to_string(slice));
        Case c;
        c.count = unitCount(va.algo()) * 3;
        c.inplace = inplace;
        c.type = DataType::kInt32;
        c.options.sliceBytes = slice;
        c.options.slots = slots;
        c.engineThreads = threads;
        c.instances = instances;
        c.protocol = static_cast<int>(protocol);
        c.spec = spec;
        runAndCheck(va, c);
      }
}

ir::Algorithm lagByChunk(ir::Algorithm a, int period, int base) {
  for (ir::Rank& r : a.ranks)
    for (ir::Threadblock& tb : r.tbs)
      for (ir::Step& s : tb.steps) {
        const int chunk = std::max(0, s.srcOff >= 0 ? s.srcOff : s.dstOff);
        s.lag = static_cast<uint16_t>(base + chunk % period);
      }
  return a;
}

}  // namespace chorus::testing
