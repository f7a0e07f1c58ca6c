#include "tests/support/collective_check.h"

#include <gtest/gtest.h>

#include "runtime/check.h"
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
  Status st =
      c.threaded ? runThreaded(va, calls, threaded) : runDeterministic(va, calls, c.options);
  ASSERT_TRUE(st.isOk()) << st.toString();
  std::string first;
  size_t wrong = data.value().countWrong(&first);
  EXPECT_EQ(wrong, 0u) << va.algo().name << " (" << dataTypeName(c.type) << " "
                       << reduceOpName(c.op) << ", count " << c.count << "): " << first;
}

size_t unitCount(const ir::Algorithm& a) { return runtime::countQuantum(a); }

}  // namespace chorus::testing
