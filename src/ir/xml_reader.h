// Reads an algorithm in MSCCL's XML format (both dialects: the one the
// current MSCCL executor accepts, and msccl-tools' older output that lacks
// outofplace/minBytes/maxBytes, may carry redop/nthreads, spells
// reduce_scatter, or omits ngpus). Every problem is a diagnostic naming
// file:line:column; the reader never throws and never aborts on bad input.
//
// Ranks and threadblocks are stored sorted by id; whether the ids are exactly
// 0..n-1 is a structural check (validate.h), not the reader's.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/diagnostic.h"
#include "ir/ir.h"

namespace chorus::ir {

struct ReadResult {
  std::optional<Algorithm> algorithm;  // set iff no error was found
  DiagnosticList diagnostics;
  // A program file read for one rank (readXml's `focus`): that rank, whose
  // threadblocks alone `algorithm` holds (every rank keeps its id and chunk
  // counts), and the program's root (rooted collectives; else -1). -1: the
  // whole algorithm.
  int part = -1;
  int root = -1;
  // The file was parsed one <gpu> at a time (ReadOptions::chunkedBytes).
  bool byGpu = false;
};

// A compact program file (docs/scale.md): one element,
//   <program name="ring_allreduce" ranks="1024" instances="2" .../>,
// names a registered program of the Chorus language and its options
// instead of listing every step, so its size does not grow with the rank
// count. This layer reads the element; expanding it needs the compiler,
// which is above it, so a caller that can expand passes the compiler's
// ProgramFiles in its ReadOptions (compiler::readOptions(): the chorus
// command, the C API, the Python package do). Without them, reading one is
// an error that says so.
struct ProgramReference {
  std::string file;
  SourcePos pos;
  struct Attribute {
    std::string name, value;
    SourcePos pos;
  };
  std::vector<Attribute> attributes;  // in file order
};
// Expands a program file whole, or builds one rank's part of it
// (ReadResult::part is the rank).
struct ProgramFiles {
  ReadResult (*whole)(const ProgramReference&) = nullptr;
  ReadResult (*part)(const ProgramReference&, int rank) = nullptr;
};

// An MSCCL++ execution plan (ir/mscclpp_plan.h) read as an algorithm:
// proven, then lowered to two-sided steps (verify::lowerPlan), which needs
// the verifier, above this layer; callers that can pass
// verify::planFiles(). Without it, reading a plan is an error that says so.
struct PlanFiles {
  ReadResult (*lower)(std::string_view text, const std::string& fileName) = nullptr;
};

struct ReadOptions {
  // >= 0: a compact program file is built for this rank only (an <algo>
  // file is read whole regardless: check ReadResult::part).
  int focus = -1;
  // How to expand compact program files; null: they are refused.
  const ProgramFiles* programs = nullptr;
  // How to read MSCCL++ plans; null: they are refused.
  const PlanFiles* plans = nullptr;
  // From this size on, an <algo> file of the plain shape (no comment,
  // CDATA, DOCTYPE or processing instruction; <algo> holding only <gpu>
  // elements) is parsed one <gpu> at a time, in memory for one rank's
  // elements instead of the whole document's (about four times the file).
  // The result and the diagnostics are the same either way.
  size_t chunkedBytes = size_t{16} << 20;
};

// Parses `text`; `fileName` is used in locations only.
ReadResult readXml(std::string_view text, const std::string& fileName,
                   const ReadOptions& options = {});

// Maps byte offsets in a text to 1-based line:column.
class LineMap {
 public:
  explicit LineMap(std::string_view text);
  SourcePos at(size_t offset) const;

 private:
  std::vector<size_t> starts_;
};

}  // namespace chorus::ir
