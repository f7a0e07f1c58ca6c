#include "runtime/plan/selection.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "core/collectives.h"
#include "core/env.h"
#include "core/log.h"
#include "ir/json_io.h"

namespace chorus::runtime {

namespace {

// What proves a program file's part that was never verified whole.
constexpr const char* kProgramFamilyBasis =
    "the program's family, verified at 1-9, 12, 16, 24, 31, 32, 48, 63, 64, 96, 100 and 128 "
    "ranks (tests/lang/family_test.cc), and each rank's part equal to its rank of the whole "
    "compile at 1-64 (tests/lang/per_rank_test.cc)";

std::string firstError(const ir::ReadResult& read, const std::string& path) {
  for (const auto& d : read.diagnostics.items())
    if (d.severity == Severity::kError) return d.format();
  return path + ": cannot be read";
}

// Rank `rank`'s part from `read` (program file `path` read for it), or the
// reason it has none.
Result<std::shared_ptr<const VerifiedAlgorithm>> partOf(ir::ReadResult read,
                                                        const std::string& path, int rank) {
  if (!read.algorithm) return Status(StatusCode::kInvalidArgument, firstError(read, path));
  if (read.part != rank)
    return Status(StatusCode::kInternal, path + ": not a program file, but read as one");
  return VerifiedAlgorithm::fromFamily(std::move(*read.algorithm), rank, std::max(read.root, 0),
                                       kProgramFamilyBasis);
}

// "" when `a`'s header is `b`'s (a part read later against the one read at
// registration: the file may have changed since).
std::string sameHeader(const ir::Algorithm& a, const ir::Algorithm& b) {
  if (a.name != b.name || a.collective != b.collective || a.ngpus != b.ngpus ||
      a.nchunksPerLoop != b.nchunksPerLoop || a.inplace != b.inplace ||
      a.outofplace != b.outofplace || a.minBytes != b.minBytes || a.maxBytes != b.maxBytes ||
      a.protocol != b.protocol)
    return "the file changed since it was registered";
  return "";
}

}  // namespace

int proveRanksFromEnvironment() {
  return static_cast<int>(std::min<long>(envLong("CHORUS_PROVE_RANKS", kProveRanks), 1 << 30));
}

Result<std::shared_ptr<const VerifiedAlgorithm>> loadVerifiedFile(
    const std::string& path, const ir::ProgramFiles* programs) {
  ir::ReadResult read = ir::readAlgorithmFile(path, {-1, programs, &verify::planFiles()});
  if (!read.algorithm) return Status(StatusCode::kInvalidArgument, firstError(read, path));
  return VerifiedAlgorithm::make(std::move(*read.algorithm));
}

size_t requestBytes(const SelectionRequest& r) {
  return r.count * countMultiplier(r.collective, r.nranks) * dataTypeSize(r.type);
}

std::string ineligibility(const VerifiedAlgorithm& va, const SelectionRequest& r, bool sizeRange) {
  const ir::Algorithm& a = va.algo();
  if (a.collective != r.collective)
    return "it is " + a.collectiveName + ", the call " + std::string(collectiveName(r.collective));
  if (a.ngpus != r.nranks)
    return "it is for " + std::to_string(a.ngpus) + " ranks, the communicator has " +
           std::to_string(r.nranks);
  if (r.inplace ? !a.inplace : !a.outofplace)
    return std::string("it does not serve ") + (r.inplace ? "in-place" : "out-of-place") + " calls";
  if (isRooted(r.collective) && va.root() != r.root)
    return "its root is rank " + std::to_string(va.root()) + ", the call's " +
           std::to_string(r.root);
  size_t q = countQuantum(a);
  if (r.count % q != 0)
    return "count " + std::to_string(r.count) + " is not a multiple of " + std::to_string(q) +
           " (its " + std::to_string(a.nchunksPerLoop) + " chunks)";
  if (r.op == ReduceOp::kAvg && !reducesToOutput(r.collective))
    return "avg needs a reducing collective";
  if (sizeRange) {
    size_t bytes = requestBytes(r);
    if (bytes < a.minBytes)
      return std::to_string(bytes) + " bytes is below its minBytes " + std::to_string(a.minBytes);
    if (a.maxBytes != 0 && bytes > a.maxBytes)
      return std::to_string(bytes) + " bytes is above its maxBytes " + std::to_string(a.maxBytes);
  }
  return "";
}

namespace {

std::vector<std::string> filesIn(const std::string& dir, std::vector<std::string>* errors) {
  std::vector<std::string> files;
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec);
  if (ec) {
    errors->push_back(dir + ": cannot list the directory: " + ec.message());
    return files;
  }
  for (const auto& e : it) {
    std::string ext = e.path().extension().string();
    if (e.is_regular_file(ec) && (ext == ".xml" || ext == ".json"))
      files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

std::vector<std::string> AlgorithmRegistry::loadFromEnvironment() {
  std::vector<std::string> errors, files;
  for (const char* var : {"CHORUS_ALGO_DIR", "MSCCL_ALGO_DIR"}) {
    const char* dir = std::getenv(var);
    if (dir == nullptr || *dir == '\0') continue;
    for (std::string& f : filesIn(dir, &errors)) files.push_back(std::move(f));
  }
  if (const char* list = std::getenv("MSCCL_XML_FILES"); list != nullptr) {
    std::string s(list);
    size_t start = 0;
    while (start <= s.size()) {
      size_t end = s.find(':', start);
      if (end == std::string::npos) end = s.size();
      if (end > start) files.push_back(s.substr(start, end - start));
      start = end + 1;
    }
  }
  for (const std::string& f : files) {
    Status st = addFile(f);
    if (!st.isOk()) errors.push_back(st.message());
  }
  for (const std::string& e : errors) logLine(LogLevel::kWarn, "skipping algorithm: " + e);
  return errors;
}

Status AlgorithmRegistry::addFile(const std::string& path, int proveRanks) {
  // A program file is read for rank 0 first: past proveRanks, that part is
  // its header (and shows a bad file now, not at its first call), and no
  // whole expansion is made; within, the file is then expanded whole. Any
  // other file is read whole, once.
  ir::ReadResult head = ir::readAlgorithmFile(path, readOptions(0));
  if (!head.algorithm) return Status(StatusCode::kInvalidArgument, firstError(head, path));
  if (head.part < 0) {
    auto va = VerifiedAlgorithm::make(std::move(*head.algorithm));
    if (!va.isOk()) return va.status();
    add(path, std::move(va).value());
    return Status::ok();
  }
  if (head.algorithm->ngpus > proveRanks) {
    auto va = partOf(std::move(head), path, 0);
    if (!va.isOk()) return va.status();
    std::lock_guard<std::mutex> lock(mu_);
    Entry e{path, va.value(), true, {}};
    e.byRank[0] = va.value();
    entries_.push_back(std::move(e));
    return Status::ok();
  }
  auto va = loadVerifiedFile(path, programs_);
  if (!va.isOk()) return va.status();
  add(path, std::move(va).value());
  return Status::ok();
}

void AlgorithmRegistry::add(std::string source, std::shared_ptr<const VerifiedAlgorithm> va) {
  std::lock_guard<std::mutex> lock(mu_);
  entries_.push_back({std::move(source), std::move(va), false, {}});
}

size_t AlgorithmRegistry::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

Result<std::shared_ptr<const VerifiedAlgorithm>> AlgorithmRegistry::select(
    const SelectionRequest& r, std::vector<std::string>* why) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::shared_ptr<const VerifiedAlgorithm> chosen;
  for (Entry& e : entries_) {
    if (chosen != nullptr) {
      if (why != nullptr)
        why->push_back(e.source + ": not considered (an earlier file was chosen)");
      continue;
    }
    std::string no = ineligibility(*e.va, r);
    if (no.empty() && e.parts && r.focus < 0)
      no = "its " + std::to_string(e.va->algo().ngpus) +
           " ranks are past CHORUS_PROVE_RANKS: only processes run it, each its own part";
    if (no.empty() && e.parts) {
      auto& part = e.byRank[r.focus];
      if (part == nullptr) {
        // Every other rank chose this file (the same files, the same header):
        // a rank whose part cannot be built, or differs, fails the call
        // rather than run something else.
        auto made =
            partOf(ir::readAlgorithmFile(e.source, readOptions(r.focus)), e.source, r.focus);
        std::string differs =
            made.isOk() ? sameHeader(made.value()->algo(), e.va->algo()) : std::string();
        if (!made.isOk() || !differs.empty()) {
          e.byRank.erase(r.focus);
          return Status(
              StatusCode::kInvalidArgument,
              "rank " + std::to_string(r.focus) + " cannot build its part of " + e.source +
                  ", which the ranks chose: " + (made.isOk() ? differs : made.status().message()));
        }
        part = made.value();
      }
      chosen = part;
      if (why != nullptr)
        why->push_back(e.source + ": chosen, rank " + std::to_string(r.focus) +
                       "'s part, not verified whole: it rests on " + part->basis());
      continue;
    }
    if (no.empty()) chosen = e.va;
    if (why != nullptr)
      why->push_back(e.source + (no.empty() ? ": chosen" : ": not eligible: " + no));
    if (why == nullptr && chosen != nullptr) break;
  }
  return chosen;
}

}  // namespace chorus::runtime
