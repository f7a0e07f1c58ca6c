// How a front end reads an algorithm file (the `chorus` command, the
// Python package, the report): MSCCL XML or JSON, compact program files
// expanded by the compiler, MSCCL++ execution plans proven and lowered by
// the verifier.
#pragma once

#include "compiler/program_file.h"
#include "ir/xml_reader.h"
#include "verify/plan_verifier.h"

namespace chorus::workflows {

inline ir::ReadOptions readOptions(int focus = -1) {
  ir::ReadOptions o = compiler::readOptions(focus);
  o.plans = &verify::planFiles();
  return o;
}

}  // namespace chorus::workflows
