// What a collective means, for the verifier (docs/spec/IR.md sections 3 and 5): the
// real size of each rank's input and output buffer for a call form, how an
// in-place call aliases them, and what every output chunk must hold at the
// end, as a multiset of input contributions in_q[k].
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/diagnostic.h"
#include "ir/ir.h"

namespace chorus::verify {

// A user-given specification for a collective the verifier does not know
// (docs/postcondition.md). Loaded from JSON; `holds` lists (rank, input chunk)
// contributions. Chunks not listed are unconstrained.
struct PostCondition {
  std::string collective;
  int inputChunks = 0;   // per rank
  int outputChunks = 0;  // per rank
  struct Entry {
    int rank = 0;
    int chunk = 0;  // output chunk
    std::vector<std::pair<int, int>> holds;
  };
  std::vector<Entry> entries;
};

// Reads a post-condition file; problems are E309 diagnostics with the JSON path.
std::optional<PostCondition> readPostCondition(const std::string& path, DiagnosticList& diags);
// The same from the text itself; diagnostics name `name`.
std::optional<PostCondition> parsePostCondition(std::string_view text, const std::string& name,
                                                DiagnosticList& diags);
// The JSON text readPostCondition reads (one entry per line).
std::string writePostCondition(const PostCondition& pc);

// The buffers of one call form of one algorithm, as physical chunk slots per
// rank: [0, mainSlots) holds input and output (one region each when out of
// place, one shared region when in place), then scratch.
class CallModel {
 public:
  // `spec` is used when the collective is custom (or to override a known one).
  // On failure, `whyNot` explains and `whyCode` is E307 (indivisible) or
  // N308 (no specification).
  static std::optional<CallModel> make(const ir::Algorithm& algo, bool inplace,
                                       const PostCondition* spec, std::string* whyNot,
                                       DiagCode* whyCode);

  bool inplace() const { return inplace_; }
  int inputChunks() const { return in_; }
  int outputChunks() const { return out_; }
  // Physical slot of chunk `idx` of buffer `b` on `rank`, or -1 when the
  // chunk lies outside what the call provides.
  int slot(int rank, ir::Buffer b, int idx) const;
  int slotCount(int rank) const;
  // Slots that initially hold in_rank[k], for k in [0, inputChunks).
  int inputSlot(int rank, int k) const { return slot(rank, ir::Buffer::kInput, k); }
  int outputSlot(int rank, int k) const { return slot(rank, ir::Buffer::kOutput, k); }

  // How the algorithm addresses output chunk `k` of `rank`: "o[3]", or for an
  // in-place call whose output lives in the input buffer, "i[3]".
  std::string outputName(int rank, int k) const;

  // Whether the post-condition depends on a root rank.
  bool rooted() const { return rooted_; }
  // Input chunk `chunk` of ranks [fromRank, toRank), once each.
  struct Contributions {
    int chunk = 0;
    int fromRank = 0, toRank = 0;
  };
  // What output chunk `k` of `rank` must hold, or nullopt if unconstrained
  // (`root` is ignored unless rooted()): a reduction of one chunk over all
  // ranks is one range, not N pairs, so the verifier compares it in O(1).
  std::optional<std::vector<Contributions>> expected(int rank, int k, int root) const;

 private:
  const ir::Algorithm* algo_ = nullptr;
  const PostCondition* spec_ = nullptr;
  CollectiveKind kind_ = CollectiveKind::kCustom;
  bool inplace_ = false;
  bool rooted_ = false;
  int in_ = 0, out_ = 0, perRank_ = 0;  // perRank_: c = chunks per rank block
  enum class Alias { kNone, kSame, kInputInOutput, kOutputInInput } alias_ = Alias::kNone;
  std::vector<std::vector<std::vector<std::pair<int, int>>>> specTable_;  // [rank][chunk]
  std::vector<std::vector<bool>> specHas_;
};

}  // namespace chorus::verify
