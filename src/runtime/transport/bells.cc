#include "runtime/transport/bells.h"

#include <unistd.h>

#include <new>
#include <random>

#include "core/log.h"

namespace chorus::runtime {

namespace {

constexpr size_t kBellBytes = 4096;
// After the doorbell in each rank's segment: where to find a word in its
// process and the value it holds (the cross-memory attach probe).
constexpr size_t kProbeOffset = 2048;
struct ProbeWord {
  int32_t pid = 0;
  uint64_t address = 0;
  uint64_t value = 0;
};

std::string bellName(const std::string& prefix, int r) {
  return prefix + "-bell-" + std::to_string(r);
}

}  // namespace

Result<std::unique_ptr<RankBells>> RankBells::create(const std::string& prefix, int me, int n,
                                                     Bootstrap& boot,
                                                     const std::vector<bool>& unmapped,
                                                     bool tryCrossMemory) {
  std::unique_ptr<RankBells> b(new RankBells());
  b->me_ = me;
  b->segments_.resize(static_cast<size_t>(n));
  b->bells_.assign(static_cast<size_t>(n), nullptr);
  auto mine = Segment::create(bellName(prefix, me), kBellBytes);
  if (!mine.isOk()) return mine.status();
  b->bells_[static_cast<size_t>(me)] = new (mine.value()->data()) Doorbell(/*shared=*/true);
  // Where peers find a word to read in this process, and what it holds.
  std::random_device rd;
  b->probe_ = (uint64_t{rd()} << 32) | rd() | 1;
  auto* probe = reinterpret_cast<ProbeWord*>(static_cast<unsigned char*>(mine.value()->data()) +
                                             kProbeOffset);
  *probe = ProbeWord{static_cast<int32_t>(::getpid()), reinterpret_cast<uintptr_t>(&b->probe_),
                     b->probe_};
  b->segments_[static_cast<size_t>(me)] = std::move(mine).value();
  CHORUS_RETURN_IF_ERROR(boot.barrier());
  bool readable = tryCrossMemory;
  for (int r = 0; r < n; ++r) {
    if (r == me || unmapped[static_cast<size_t>(r)]) continue;
    auto s = Segment::open(bellName(prefix, r), kBellBytes);
    if (!s.isOk()) return s.status();
    b->bells_[static_cast<size_t>(r)] = static_cast<Doorbell*>(s.value()->data());
    if (readable) {
      ProbeWord theirs = *reinterpret_cast<const ProbeWord*>(
          static_cast<unsigned char*>(s.value()->data()) + kProbeOffset);
      uint64_t seen = 0;
      Status st = readPeerMemory(theirs.pid, theirs.address, &seen, sizeof seen,
                                 "rank " + std::to_string(r) + "'s probe word");
      readable = st.isOk() && seen == theirs.value;
      if (!readable) logLine(LogLevel::kInfo, "no cross-memory attach: " + st.message());
    }
    b->segments_[static_cast<size_t>(r)] = std::move(s).value();
  }
  // The ranks agree: single copies only if every rank can read its peers.
  auto all = boot.allGather(readable ? "1" : "0");
  if (!all.isOk()) return all.status();
  b->crossMemory_ = true;
  for (const std::string& v : all.value()) b->crossMemory_ = b->crossMemory_ && v == "1";
  b->segments_[static_cast<size_t>(me)]->unlink();
  return b;
}

}  // namespace chorus::runtime
