// The Chorus language: a collective algorithm written as the journey of
// chunks between ranks' buffers (MSCCLang's model), in ordinary C++.
//
//   chorus::lang::Program p({.name = "ring_allgather", .collective = "allgather", .ranks = 4});
//   for (int r = 0; r < 4; ++r) {
//     chorus::lang::Chunk c = p.chunk(r, chorus::lang::kInput, 0);
//     c = c.copy(r, chorus::lang::kOutput, r);          // my own block
//     for (int step = 1; step < 4; ++step)               // then around the ring
//       c = c.copy((r + step) % 4, chorus::lang::kOutput, r);
//   }
//
// The program only records what happens (a trace, in program order); the
// compiler (chorus gen, or lang::compile in the library) turns it into the
// Algorithm IR, which the verifier then proves. Every operation remembers the
// line that called it, so a misuse (a chunk read before anything is there,
// an index past the buffer, a rank that does not exist) is reported at that
// line and the operation is dropped; nothing here throws or aborts.
#pragma once

#include <cstdint>
#include <set>
#include <source_location>
#include <string>
#include <vector>

namespace chorus::lang {

// A buffer of every rank: the call's input and output, or a scratch buffer
// made by Program::scratch (ids from 2 up).
using Buffer = int;
inline constexpr Buffer kInput = 0;
inline constexpr Buffer kOutput = 1;

struct ProgramOptions {
  std::string name = {};
  // allreduce, allgather, reducescatter, alltoall, broadcast, reduce,
  // gather, scatter; any other name is a custom collective, whose meaning
  // the program states with Program::postcondition (and, optionally,
  // Program::precondition).
  std::string collective = {};
  int ranks = 0;
  // Chunks per rank's share (MSCCLang's chunk factor); for a custom
  // collective, the chunks of each rank's input and of its output buffer.
  int chunkFactor = 1;
  bool inplace = false;
  std::string protocol = "Simple";  // Simple, LL, LL128
  int instances = 1;  // the program is replicated this many times, on channels of its own
  // How the instances share the buffers: interleaved (chunk x of instance i
  // is chunk x * instances + i) or blocked (inside each rank's share, each
  // instance's chunks together; MSCCLang's interleaved_replication=False).
  bool blockedInstances = false;
  int root = 0;  // broadcast, reduce, gather, scatter
  // Ranks per node for programs that know the topology (0: one node); rank
  // r is GPU r % gpusPerNode of node r / gpusPerNode.
  int gpusPerNode = 0;
  // Channels one instance of a program spreads its chunks over (programs
  // that read it: ring programs put chunk k on channel k % channels).
  int channels = 1;
  // Send-only and receive-only connections with the same peer and channel
  // share a threadblock (fewer threadblocks: MSCCL's executor limits them).
  // Off, each keeps its own, so a send waiting for its data never holds up
  // an unrelated receive (synthesized forests: docs/synthesis.md).
  bool pairThreadblocks = true;
  // Per-rank lowering (docs/scale.md): record only what touches this rank.
  // -1 (the default) records the whole program. A program's per-rank form
  // (ProgramEntry::buildRank) runs with it set: operations that touch no
  // place of this rank are dropped, presence is not tracked (the rank does
  // not see the others' buffers), and the form states every operation's
  // depth (Program::depth) and every scratch buffer's extent.
  int focus = -1;
  // The slice the runtimes cut each chunk into per iteration, in bytes (a
  // multiple of 16; 0: the protocol's): written as the IR's sliceBytes
  // (docs/spec/IR.md section 3). Small slices pipeline a chunk hop by hop as
  // many chunks would, without their steps.
  uint64_t sliceBytes = 0;
};

// Input chunk `index` of `rank`: what a custom collective's results are made of.
struct Source {
  int rank = 0;
  int index = 0;
};

// What output chunk `index` of `rank` holds when a custom collective ends:
// the reduction of `holds`, each once (one source: a copy of it).
struct Expected {
  int rank = 0;
  int index = 0;
  std::vector<Source> holds;
};

// Where in the user's source an operation was written: by default the
// caller's line (std::source_location, filled in at the call), or a file
// and line a front end supplies (the Python package: the user's .py line).
// Problems and the compiler's diagnostics point there. `file` must outlive
// the call; the program keeps its own copy.
struct Where {
  Where(std::source_location l)  // NOLINT(google-explicit-constructor): the default argument
      : file(l.file_name()),
        line(static_cast<int>(l.line())),
        column(static_cast<int>(l.column())) {}
  Where(const char* f, int l, int c = 0) : file(f), line(l), column(c) {}
  const char* file;
  int line;
  int column;
};

// Where an operation may run; -1 = the compiler chooses.
struct Hints {
  int channel = -1;
  int sendTb = -1;  // on the sending rank (a local copy or reduction: where it runs)
  int recvTb = -1;  // on the receiving rank
  // The schedule's round before which the operation is not taken (0: as
  // soon as its data allows). The compiler orders each rank's work by round
  // (the depth of its data dependencies); a piece cut into chunks whose
  // chunk c starts at round c is pipelined: a threadblock forwards every
  // piece's first chunk before any piece's second.
  int round = 0;
  // The slices its steps lag behind their threadblocks' loops (ir::Step::lag,
  // 0 to 65535): in iteration j they move slice j - lag. Steps of lag 0 on
  // the same threadblock go that many slices ahead of it, as rounds of
  // chunks would put them, in a schedule pipelined by slices. An operation
  // may not wait for one of a larger lag (the compiler says where).
  int lag = 0;
};

// A problem in the program, at the line that caused it.
struct Problem {
  std::string file;
  int line = 0;
  int column = 0;
  std::string message;
};

class Program;

// `size` consecutive chunks from `index` of one buffer of one rank, as a
// value of the program (what is there now). Copying or reducing gives the
// reference to the result.
class Chunk {
 public:
  Chunk() = default;
  int rank() const { return rank_; }
  Buffer buffer() const { return buffer_; }
  int index() const { return index_; }
  int size() const { return size_; }
  // False for a reference a diagnosed misuse produced (operations on it are
  // dropped silently: the first problem is the one reported).
  bool valid() const { return program_ != nullptr; }

  // Copies these chunks to `rank`'s `buffer` at `index` and returns the copy.
  Chunk copy(int rank, Buffer buffer, int index, Hints hints = {},
             Where where = std::source_location::current()) const;
  // Reduces `other` (same size, any rank) into these chunks and returns them.
  Chunk reduce(const Chunk& other, Hints hints = {},
               Where where = std::source_location::current()) const;
  // The same, but the result goes to this rank's `buffer` at `index` and
  // these chunks stay as they are (an out-of-place reduction).
  Chunk reduce(const Chunk& other, Buffer buffer, int index, Hints hints = {},
               Where where = std::source_location::current()) const;
  // The same chunks as `parts` references of equal size.
  std::vector<Chunk> split(int parts, Where where = std::source_location::current()) const;

 private:
  friend class Program;
  Chunk(Program* p, int rank, Buffer b, int index, int size)
      : program_(p), rank_(rank), buffer_(b), index_(index), size_(size) {}
  Program* program_ = nullptr;
  int rank_ = -1;
  Buffer buffer_ = kInput;
  int index_ = -1;
  int size_ = 0;
};

// One recorded operation over `size` chunks: dst = src (copy), or
// dst = local (+) src (reduce; `local` is on dst's rank, often dst itself).
struct Operation {
  enum class Kind { kCopy, kReduce };
  struct Place {
    int rank = -1;
    Buffer buffer = kInput;
    int index = -1;
  };
  Kind kind = Kind::kCopy;
  Place src, dst, local;
  int size = 1;
  Hints hints;
  const char* file = "";  // where it was recorded (Where; the program owns the text)
  int line = 0;
  int column = 0;
  // Per-rank forms: the depth the whole program's schedule gives it
  // (Program::depth); 0 where the compiler computes it.
  int depth = 0;
};

class Program {
 public:
  explicit Program(ProgramOptions options, Where where = std::source_location::current());
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  // A reference to chunks that hold data now (the input at the start).
  // In-place programs may name either buffer: they are one (allgather:
  // rank r's input chunk k is its output chunk r * chunks + k).
  Chunk chunk(int rank, Buffer buffer, int index, int size = 1,
              Where where = std::source_location::current());
  // A scratch buffer of every rank, sized by the largest index used on any
  // rank, or by `extent` chunks if that is larger. Per-rank forms give the
  // extent: they do not see the other ranks' indices.
  Buffer scratch(const std::string& name, int extent = 0);
  const std::vector<int>& scratchExtents() const { return scratchExtents_; }

  // Per-rank forms (ProgramOptions::focus): the depth of the operations
  // recorded from now on, i.e. the one the compiler's schedule gives them
  // in the whole program (compiler.h). Whole programs need not call it.
  void depth(int d) { depth_ = d; }
  // Room for this many operations (a per-rank form that knows its count).
  void reserve(size_t operations) { ops_.reserve(operations); }
  int focus() const { return options_.focus; }
  // Whether the rank is the focus, or every rank is recorded.
  bool records(int rank) const { return options_.focus < 0 || options_.focus == rank; }
  // Consecutive references of one buffer of one rank as one.
  Chunk group(const std::vector<Chunk>& parts, Where where = std::source_location::current());

  // Custom collectives. The input chunks that hold data when the call
  // starts (default: all of them); reading any other input chunk is a
  // misuse. Call before the first operation.
  void precondition(const std::vector<Source>& present,
                    Where where = std::source_location::current());
  // What one output chunk must hold at the end; chunks never named are
  // unconstrained. The verifier proves the compiled algorithm against these
  // (and `chorus run --spec` checks real data against them).
  void postcondition(int rank, int index, std::vector<Source> holds,
                     Where where = std::source_location::current());
  bool custom() const { return custom_; }
  const std::vector<Expected>& postconditions() const { return post_; }

  // For a program's own conditions on its options: false, and a problem at
  // the caller's line, unless `ok`.
  bool require(bool ok, const std::string& message, Where where = std::source_location::current());

  const ProgramOptions& options() const { return options_; }
  const std::string& file() const { return file_; }
  int line() const { return line_; }  // where the Program was made
  // Chunks of the input and output buffers of each rank (one instance).
  int inputChunks() const { return inputChunks_; }
  int outputChunks() const { return outputChunks_; }
  const std::vector<std::string>& scratchNames() const { return scratchNames_; }
  const std::vector<Operation>& operations() const { return ops_; }
  // Frees the recorded operations: for a compiler that owns the program,
  // once it has lowered them (operations() is then empty).
  void releaseOperations() { std::vector<Operation>().swap(ops_); }
  const std::vector<Problem>& problems() const { return problems_; }

 private:
  friend class Chunk;
  // Records a problem at `where`; returns false.
  bool fail(const Where& where, const std::string& message);
  // Maps an in-place buffer reference to the one buffer that holds it.
  void canonical(int rank, Buffer* b, int* index) const;
  bool inRange(int rank, Buffer b, int index, int size, const Where& where);
  bool present(int rank, Buffer b, int index, int size, const Where& where);
  void mark(int rank, Buffer b, int index, int size);
  Chunk record(Operation::Kind kind, const Chunk& src, const Chunk* local, int rank, Buffer b,
               int index, Hints h, const Where& where);
  std::vector<char>& presence(int rank, Buffer b);

  ProgramOptions options_;
  std::string file_;
  int line_ = 0;
  int inputChunks_ = 0, outputChunks_ = 0;
  bool custom_ = false;
  std::vector<Expected> post_;
  std::vector<char> posted_;  // [rank * outputChunks + index]: stated
  std::vector<std::string> scratchNames_;
  std::vector<int> scratchExtents_;
  std::vector<Operation> ops_;
  int depth_ = 0;
  bool refused_ = false;                // the options were refused: nothing is recorded
  const char* lastInterned_ = nullptr;  // the file of the last operation, in files_
  std::vector<Problem> problems_;
  // presence_[rank][buffer][index]: something is there (scratch grows).
  std::vector<std::vector<std::vector<char>>> presence_;
  // The source files operations name (Operation::file points here).
  std::set<std::string, std::less<>> files_;
};

}  // namespace chorus::lang
