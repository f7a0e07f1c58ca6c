// The recording side of the language: checks every operation against what
// the buffers hold at that point of the program and appends it to the trace.
#include <algorithm>
#include <cctype>
#include <chorus/lang.hpp>
#include <cstdint>
#include <cstring>

#include "lang/collectives.h"

// `ok`, or a problem at `where` (the message is only built on failure).
#define CHORUS_LANG_CHECK(program, ok, where, message) ((ok) || (program)->fail((where), (message)))

namespace chorus::lang {

namespace {
// Known collectives, and names a custom one may have (it becomes the XML's
// `coll`); send, recv and alltoallv depend on per-call arguments.
bool customNameOk(const std::string& name) {
  if (shapeOf(name, 1, 1).known) return true;
  if (name.empty() || name == "send" || name == "recv" || name == "alltoallv") return false;
  for (char ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_' && ch != '-') return false;
  return true;
}
}  // namespace

Program::Program(ProgramOptions options, Where where)
    : options_(std::move(options)), file_(where.file), line_(where.line) {
  const ProgramOptions& o = options_;
  Shape shape = shapeOf(o.collective, o.ranks, o.chunkFactor);
  custom_ = !shape.known;
  // Any other name is a custom collective: one buffer size both ways.
  if (custom_) shape = {true, o.chunkFactor, o.chunkFactor};
  bool ok = CHORUS_LANG_CHECK(this, customNameOk(o.collective), where,
                              "collective '" + o.collective +
                                  "' cannot be written as a program: name one of allreduce, "
                                  "allgather, reducescatter, alltoall, broadcast, reduce, gather, "
                                  "scatter, or a custom collective (letters, digits, '_', '-')");
  ok = ok && CHORUS_LANG_CHECK(this, o.ranks >= 1, where, "a program needs at least one rank");
  ok = ok && CHORUS_LANG_CHECK(this, o.chunkFactor >= 1, where, "chunkFactor must be at least 1");
  ok = ok && CHORUS_LANG_CHECK(this, o.instances >= 1, where, "instances must be at least 1");
  ok = ok && CHORUS_LANG_CHECK(this, o.channels >= 1, where, "channels must be at least 1");
  ok = ok && CHORUS_LANG_CHECK(
                 this, o.protocol == "Simple" || o.protocol == "LL" || o.protocol == "LL128", where,
                 "protocol '" + o.protocol + "' is not Simple, LL or LL128");
  ok = ok && CHORUS_LANG_CHECK(
                 this, o.root >= 0 && o.root < o.ranks, where,
                 "root " + std::to_string(o.root) + " is not a rank of " + std::to_string(o.ranks));
  ok = ok &&
       CHORUS_LANG_CHECK(
           this, int64_t{o.ranks} * o.chunkFactor * o.instances <= (int64_t{1} << 30), where,
           "ranks x chunk factor x instances is past 2^30 chunks (" + std::to_string(o.ranks) +
               " x " + std::to_string(o.chunkFactor) + " x " + std::to_string(o.instances) + ")");
  ok = ok && CHORUS_LANG_CHECK(this, o.focus >= -1 && o.focus < o.ranks, where,
                               "focus " + std::to_string(o.focus) + " is not a rank of " +
                                   std::to_string(o.ranks) + " (or -1: the whole program)");
  refused_ = !ok;
  if (!ok) return;
  inputChunks_ = shape.input;
  outputChunks_ = shape.output;
  if (o.focus >= 0) return;  // a per-rank form: no presence (it does not see the others)
  presence_.assign(static_cast<size_t>(o.ranks), {});
  for (int r = 0; r < o.ranks; ++r) {
    presence(r, kInput).assign(static_cast<size_t>(inputChunks_), 1);
    presence(r, kOutput).assign(static_cast<size_t>(outputChunks_), 0);
  }
  if (o.inplace) {
    // The input's chunks live in the one buffer: mark them there.
    for (int r = 0; r < o.ranks; ++r)
      for (int k = 0; k < inputChunks_; ++k) {
        Buffer b = kInput;
        int index = k;
        canonical(r, &b, &index);
        presence(r, b)[static_cast<size_t>(index)] = 1;
      }
  }
}

void Program::precondition(const std::vector<Source>& present, Where where) {
  if (refused_ || options_.focus >= 0) return;
  if (!CHORUS_LANG_CHECK(this, custom_, where,
                         "precondition() is for custom collectives; every input chunk of " +
                             options_.collective + " holds data"))
    return;
  if (!CHORUS_LANG_CHECK(this, ops_.empty(), where,
                         "precondition() after the first operation (state it first)"))
    return;
  std::vector<std::vector<char>> have(static_cast<size_t>(options_.ranks),
                                      std::vector<char>(static_cast<size_t>(inputChunks_), 0));
  for (const Source& s : present) {
    if (!inRange(s.rank, kInput, s.index, 1, where)) return;
    have[static_cast<size_t>(s.rank)][static_cast<size_t>(s.index)] = 1;
  }
  for (int r = 0; r < options_.ranks; ++r)
    for (int k = 0; k < inputChunks_; ++k) {
      Buffer b = kInput;
      int index = k;
      canonical(r, &b, &index);
      presence(r, b)[static_cast<size_t>(index)] =
          have[static_cast<size_t>(r)][static_cast<size_t>(k)];
    }
}

void Program::postcondition(int rank, int index, std::vector<Source> holds, Where where) {
  // Per-rank forms are not verified (their whole program is): nothing to state.
  if (refused_ || options_.focus >= 0) return;
  if (!CHORUS_LANG_CHECK(this, custom_, where,
                         "postcondition() is for custom collectives; the verifier knows what " +
                             options_.collective + " computes"))
    return;
  if (!inRange(rank, kOutput, index, 1, where)) return;
  if (!CHORUS_LANG_CHECK(this, !holds.empty(), where,
                         "postcondition() of rank " + std::to_string(rank) + " output chunk " +
                             std::to_string(index) + " lists no input chunk"))
    return;
  for (const Source& s : holds)
    if (!inRange(s.rank, kInput, s.index, 1, where)) return;
  posted_.resize(static_cast<size_t>(options_.ranks) * static_cast<size_t>(outputChunks_));
  char& stated = posted_[static_cast<size_t>(rank) * static_cast<size_t>(outputChunks_) +
                         static_cast<size_t>(index)];
  if (!CHORUS_LANG_CHECK(this, stated == 0, where,
                         "postcondition() of rank " + std::to_string(rank) + " output chunk " +
                             std::to_string(index) + " stated twice"))
    return;
  stated = 1;
  post_.push_back(Expected{rank, index, std::move(holds)});
}

bool Program::require(bool ok, const std::string& message, Where where) {
  return ok || fail(where, message);
}

std::vector<char>& Program::presence(int rank, Buffer b) {
  auto& bufs = presence_[static_cast<size_t>(rank)];
  if (bufs.size() <= static_cast<size_t>(b)) bufs.resize(static_cast<size_t>(b) + 1);
  return bufs[static_cast<size_t>(b)];
}

bool Program::fail(const Where& where, const std::string& message) {
  problems_.push_back(Problem{where.file, where.line, where.column, message});
  return false;
}

void Program::canonical(int rank, Buffer* b, int* index) const {
  if (!options_.inplace) return;
  InPlace ip = inPlaceOf(options_.collective);
  int c = options_.chunkFactor;
  if (ip == InPlace::kOutputIsInput && *b == kOutput) *b = kInput;
  if (ip == InPlace::kInputInOutput && *b == kInput) {
    *b = kOutput;
    *index += rank * c;
  }
  if (ip == InPlace::kOutputInInput && *b == kOutput) {
    *b = kInput;
    *index += rank * c;
  }
}

namespace {
std::string bufferName(const Program& p, Buffer b) {
  if (b == kInput) return "input";
  if (b == kOutput) return "output";
  size_t s = static_cast<size_t>(b - 2);
  return s < p.scratchNames().size() ? "scratch '" + p.scratchNames()[s] + "'"
                                     : "buffer " + std::to_string(b);
}
std::string place(const Program& p, int rank, Buffer b, int index, int size) {
  std::string s =
      "rank " + std::to_string(rank) + " " + bufferName(p, b) + " chunk " + std::to_string(index);
  if (size > 1) s += ".." + std::to_string(index + size - 1);
  return s;
}
}  // namespace

bool Program::inRange(int rank, Buffer b, int index, int size, const Where& where) {
  if (!CHORUS_LANG_CHECK(
          this, rank >= 0 && rank < options_.ranks, where,
          "rank " + std::to_string(rank) + " is not in 0.." + std::to_string(options_.ranks - 1)))
    return false;
  if (!CHORUS_LANG_CHECK(
          this, b >= 0 && b < 2 + static_cast<int>(scratchNames_.size()), where,
          "buffer " + std::to_string(b) + " is not input, output or a scratch buffer"))
    return false;
  if (!CHORUS_LANG_CHECK(this, size >= 1, where, "a chunk reference needs a size of at least 1"))
    return false;
  int limit = b == kInput ? inputChunks_ : b == kOutput ? outputChunks_ : -1;
  return CHORUS_LANG_CHECK(this, index >= 0 && (limit < 0 || index + size <= limit), where,
                           place(*this, rank, b, index, size) + " is outside the buffer (" +
                               (limit < 0 ? std::string("indices start at 0")
                                          : std::to_string(limit) + " chunks per rank") +
                               ")");
}

bool Program::present(int rank, Buffer b, int index, int size, const Where& where) {
  if (options_.focus >= 0) return true;
  std::vector<char>& have = presence(rank, b);
  for (int k = index; k < index + size; ++k)
    if (static_cast<size_t>(k) >= have.size() || have[static_cast<size_t>(k)] == 0)
      return CHORUS_LANG_CHECK(
          this, false, where,
          place(*this, rank, b, k, 1) +
              " is read before anything was put there (in this program so far)");
  return true;
}

void Program::mark(int rank, Buffer b, int index, int size) {
  if (options_.focus >= 0) return;
  std::vector<char>& have = presence(rank, b);
  if (have.size() < static_cast<size_t>(index + size))
    have.resize(static_cast<size_t>(index + size));
  for (int k = index; k < index + size; ++k) have[static_cast<size_t>(k)] = 1;
}

Chunk Program::chunk(int rank, Buffer buffer, int index, int size, Where where) {
  if (refused_) return {};
  if (!inRange(rank, buffer, index, size, where)) return {};
  canonical(rank, &buffer, &index);
  if (!present(rank, buffer, index, size, where)) return {};
  return Chunk(this, rank, buffer, index, size);
}

Buffer Program::scratch(const std::string& name, int extent) {
  for (size_t i = 0; i < scratchNames_.size(); ++i)
    if (scratchNames_[i] == name) {
      scratchExtents_[i] = std::max(scratchExtents_[i], extent);
      return static_cast<Buffer>(2 + i);
    }
  scratchNames_.push_back(name);
  scratchExtents_.push_back(std::max(extent, 0));
  return static_cast<Buffer>(1 + scratchNames_.size());
}

Chunk Program::group(const std::vector<Chunk>& parts, Where where) {
  if (!CHORUS_LANG_CHECK(this, !parts.empty(), where, "group() of no chunks")) return {};
  for (const Chunk& c : parts)
    if (!c.valid()) return {};
  const Chunk& first = parts.front();
  int next = first.index();
  for (const Chunk& c : parts) {
    if (!CHORUS_LANG_CHECK(
            this, c.rank() == first.rank() && c.buffer() == first.buffer() && c.index() == next,
            where,
            "group() needs consecutive chunks of one buffer of one rank; " +
                place(*this, c.rank(), c.buffer(), c.index(), c.size()) + " does not follow " +
                place(*this, first.rank(), first.buffer(), first.index(), next - first.index())))
      return {};
    next += c.size();
  }
  return Chunk(this, first.rank(), first.buffer(), first.index(), next - first.index());
}

namespace {
bool overlap(const Chunk& c, int rank, Buffer b, int index, int size) {
  return c.rank() == rank && c.buffer() == b && index < c.index() + c.size() &&
         c.index() < index + size;
}
}  // namespace

Chunk Program::record(Operation::Kind kind, const Chunk& src, const Chunk* local, int rank,
                      Buffer b, int index, Hints h, const Where& where) {
  if (!inRange(rank, b, index, src.size(), where)) return {};
  canonical(rank, &b, &index);
  // The source holds data (the verifier proves which: here, presence).
  if (!present(src.rank(), src.buffer(), src.index(), src.size(), where)) return {};
  if (!CHORUS_LANG_CHECK(
          this, !overlap(src, rank, b, index, src.size()), where,
          "source and destination overlap (" + place(*this, rank, b, index, src.size()) + ")"))
    return {};
  if (local != nullptr && !(local->buffer() == b && local->index() == index) &&
      !CHORUS_LANG_CHECK(this, !overlap(*local, rank, b, index, src.size()), where,
                         "the result overlaps the chunks it is computed from (" +
                             place(*this, rank, b, index, src.size()) + ")"))
    return {};
  if (local != nullptr &&
      !CHORUS_LANG_CHECK(
          this, !overlap(src, local->rank(), local->buffer(), local->index(), local->size()), where,
          "a chunk reduced with itself"))
    return {};
  if (!CHORUS_LANG_CHECK(this, h.channel >= -1 && h.sendTb >= -1 && h.recvTb >= -1, where,
                         "hints are -1 (automatic) or at least 0"))
    return {};
  if (!CHORUS_LANG_CHECK(this, h.lag >= 0 && h.lag <= 65535, where,
                         "a lag is 0 to 65535 slices (got " + std::to_string(h.lag) + ")"))
    return {};
  Operation op;
  op.kind = kind;
  op.src = {src.rank(), src.buffer(), src.index()};
  op.dst = {rank, b, index};
  op.local =
      local != nullptr ? Operation::Place{local->rank(), local->buffer(), local->index()} : op.dst;
  op.size = src.size();
  op.hints = h;
  op.depth = depth_;
  // A per-rank form keeps what its rank does: its sends, receives and local work.
  if (options_.focus >= 0 && op.src.rank != options_.focus && op.dst.rank != options_.focus)
    return Chunk(this, rank, b, index, src.size());
  // Interned once per file (consecutive operations mostly share one).
  if (lastInterned_ == nullptr || std::strcmp(where.file, lastInterned_) != 0)
    lastInterned_ = files_.emplace(where.file).first->c_str();
  op.file = lastInterned_;
  op.line = where.line;
  op.column = where.column;
  ops_.push_back(op);
  mark(rank, b, index, src.size());
  return Chunk(this, rank, b, index, src.size());
}

Chunk Chunk::copy(int rank, Buffer buffer, int index, Hints hints, Where where) const {
  if (program_ == nullptr) return {};
  return program_->record(Operation::Kind::kCopy, *this, nullptr, rank, buffer, index, hints,
                          where);
}

Chunk Chunk::reduce(const Chunk& other, Hints hints, Where where) const {
  return reduce(other, buffer_, index_, hints, where);
}

Chunk Chunk::reduce(const Chunk& other, Buffer buffer, int index, Hints hints, Where where) const {
  if (program_ == nullptr || !other.valid()) return {};
  if (!CHORUS_LANG_CHECK(
          program_, other.size_ == size_, where,
          "reduce() of " + std::to_string(other.size_) + " chunks into " + std::to_string(size_)))
    return {};
  // Still there? (A reference may outlive what it names only by misuse.)
  if (!program_->present(rank_, buffer_, index_, size_, where)) return {};
  return program_->record(Operation::Kind::kReduce, other, this, rank_, buffer, index, hints,
                          where);
}

std::vector<Chunk> Chunk::split(int parts, Where where) const {
  if (program_ == nullptr) return {};
  if (!CHORUS_LANG_CHECK(program_, parts >= 1 && size_ % parts == 0, where,
                         "split(" + std::to_string(parts) + ") of " + std::to_string(size_) +
                             " chunks: the parts must be equal"))
    return {};
  std::vector<Chunk> out;
  int each = size_ / parts;
  for (int k = 0; k < parts; ++k)
    out.push_back(Chunk(program_, rank_, buffer_, index_ + k * each, each));
  return out;
}

}  // namespace chorus::lang
