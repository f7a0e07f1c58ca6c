// Checks that one rank's part of an algorithm (docs/scale.md) is that rank
// of the whole: the header, every rank's id and chunk counts, the rank's
// threadblocks step for step (ir::Rank's ==), and no threadblock of any
// other rank.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "ir/ir.h"

namespace chorus::testing {

// `otherScratch`: whether the other ranks keep their scratch sizes too
// (a program file's part leaves them 0: nothing reads them).
inline ::testing::AssertionResult isRanksPart(const ir::Algorithm& part, const ir::Algorithm& whole,
                                              int rank, bool otherScratch = true) {
  auto fail = [&](const std::string& what) {
    return ::testing::AssertionFailure() << "rank " << rank << "'s part: " << what;
  };
  if (part.name != whole.name || part.collective != whole.collective || part.ngpus != whole.ngpus ||
      part.nchunksPerLoop != whole.nchunksPerLoop || part.inplace != whole.inplace ||
      part.outofplace != whole.outofplace || part.minBytes != whole.minBytes ||
      part.maxBytes != whole.maxBytes)
    return fail("the header differs");
  if (part.ranks.size() != whole.ranks.size()) return fail("another rank count");
  for (size_t q = 0; q < whole.ranks.size(); ++q) {
    const ir::Rank& got = part.ranks[q];
    const ir::Rank& want = whole.ranks[q];
    if (got.id != want.id || got.inputChunks != want.inputChunks ||
        got.outputChunks != want.outputChunks ||
        ((otherScratch || static_cast<int>(q) == rank) && got.scratchChunks != want.scratchChunks))
      return fail("rank " + std::to_string(q) + "'s header differs");
    if (static_cast<int>(q) == rank ? !(got == want) : !got.tbs.empty())
      return fail(static_cast<int>(q) == rank ? "its threadblocks differ from the whole's"
                                              : "it builds rank " + std::to_string(q));
  }
  return ::testing::AssertionSuccess();
}

}  // namespace chorus::testing
