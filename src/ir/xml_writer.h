// Writes an algorithm as MSCCL XML that the current MSCCL executor accepts:
// all ten <algo> attributes (name proto nchannels nchunksperloop ngpus coll
// inplace outofplace minBytes maxBytes), s = position, every step attribute.
#pragma once

#include <string>

#include "core/status.h"
#include "ir/ir.h"

namespace chorus::ir {

std::string writeXml(const Algorithm& algo);
Status writeXmlFile(const Algorithm& algo, const std::string& path);

}  // namespace chorus::ir
