// `chorus soak`: many collectives, each one checked. A seeded sequence of
// calls, the same on every rank, mixes collectives (and send/recv), sizes,
// data types, reduction ops, in-place and out-of-place forms, and
// algorithms: automatic selection, every built-in by name, and the files
// given. Every call gets fresh inputs (distinct per rank and chunk) and every
// output element is compared with the closed form. Ranks are threads of this
// process, or one process of a launched job (`chorus launch`, --procs: over
// shared memory, or TCP with CHORUS_TRANSPORT=tcp). The second half of the
// calls replays the first (the same seed again): by then every cache and
// connection has grown to what the sequence needs, so resident memory and
// open file descriptors after the replay must equal those after the first
// half; a leak per call shows as growth.
#include <dirent.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "api/convert.h"
#include "chorus/chorus.hpp"
#include "compiler/program_file.h"
#include "core/collectives.h"
#include "runtime/bootstrap/bootstrap.h"
#include "runtime/exec/check.h"
#include "runtime/plan/planner.h"
#include "runtime/plan/selection.h"
#include "tools/chorus/calls.h"
#include "tools/chorus/commands.h"

namespace chorus::cli {

namespace {

using Clock = std::chrono::steady_clock;

// Under AddressSanitizer freed memory waits in its quarantine (up to 256 MiB)
// instead of going back: resident memory then grows by design and is
// reported, not judged.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kJudgeMemory = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kJudgeMemory = false;
#else
constexpr bool kJudgeMemory = true;
#endif
#else
constexpr bool kJudgeMemory = true;
#endif

// One way to run a call: a collective and the algorithm that serves it.
struct Way {
  CollectiveKind coll = CollectiveKind::kAllReduce;  // kSend: a ring of send/recv
  chorusAlgoHandle_t handle = 0;                     // 0: automatic selection
  std::string name;                                  // "auto" or the algorithm's
  size_t quantum = 1;                                // counts are multiples of this
  int root = -1;                                     // fixed root (explicit rooted algorithms)
  bool inplace = true, outofplace = true;            // the forms it serves
};

// One call of the sequence: identical on every rank (same seed).
struct Call {
  size_t way = 0;
  size_t count = 0;
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  bool inplace = false;
  int root = 0;
  bool mapped = false;  // processes: buffers from chorusMemAlloc (peers read them in place)
};

constexpr DataType kTypes[] = {DataType::kInt8,    DataType::kUint8,    DataType::kInt32,
                               DataType::kUint32,  DataType::kInt64,    DataType::kUint64,
                               DataType::kFloat16, DataType::kBfloat16, DataType::kFloat32,
                               DataType::kFloat64, DataType::kFp8E4M3,  DataType::kFp8E5M2};
constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMax, ReduceOp::kMin,
                             ReduceOp::kAvg};

// Resident set (bytes) and open descriptors of this process.
struct Usage {
  long rssBytes = 0;
  int fds = 0;
};

Usage usage() {
  Usage u;
  long pages = 0, resident = 0;
  std::ifstream("/proc/self/statm") >> pages >> resident;
  u.rssBytes = resident * ::sysconf(_SC_PAGESIZE);
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (dirent* e = ::readdir(d))
      if (e->d_name[0] != '.') ++u.fds;
    ::closedir(d);
    --u.fds;  // the directory's own
  }
  return u;
}

std::vector<std::string> algorithmFiles(const std::vector<std::string>& paths) {
  std::vector<std::string> files;
  for (const std::string& p : paths) {
    DIR* d = ::opendir(p.c_str());
    if (d == nullptr) {
      files.push_back(p);
      continue;
    }
    std::vector<std::string> here;
    while (dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n.size() > 4 && (n.ends_with(".xml") || n.ends_with(".json")))
        here.push_back(p + "/" + n);
    }
    ::closedir(d);
    std::sort(here.begin(), here.end());
    files.insert(files.end(), here.begin(), here.end());
  }
  return files;
}

// Every way to run a call on n ranks: automatic selection per collective,
// the built-ins by name (rooted ones at root 0 and n-1), and each file
// that is for n ranks and a collective with a closed form. Loading is the
// same on every rank (a file it cannot use is skipped everywhere).
Result<std::vector<Way>> ways(const SoakArgs& a, int n) {
  std::vector<Way> out;
  for (CollectiveKind k :
       {CollectiveKind::kAllReduce, CollectiveKind::kAllGather, CollectiveKind::kReduceScatter,
        CollectiveKind::kAllToAll, CollectiveKind::kBroadcast, CollectiveKind::kReduce,
        CollectiveKind::kSend}) {
    Way w;
    w.coll = k;
    w.name = "auto";
    w.inplace = k != CollectiveKind::kSend;
    out.push_back(w);
  }
  auto add = [&](chorusAlgoHandle_t h, const runtime::VerifiedAlgorithm& va, int root) {
    Way w;
    w.coll = va.algo().collective;
    w.handle = h;
    w.name = va.algo().name;
    w.quantum = runtime::countQuantum(va.algo());
    w.root = root;
    w.inplace = va.algo().inplace;
    w.outofplace = va.algo().outofplace;
    out.push_back(w);
  };
  if (a.builtins) {
    runtime::BuiltinCache cache(n);
    for (const char* name :
         {"ring_allreduce", "halving_doubling_allreduce", "recursive_doubling_allreduce",
          "chain_allreduce", "ring_allgather", "ring_reducescatter", "pairwise_alltoall",
          "chain_broadcast", "chain_reduce", "direct_gather", "direct_scatter"}) {
      for (int root : {0, n - 1}) {
        auto va = cache.get(name, root);
        if (!va.isOk()) break;  // not for this rank count (e.g. a power of two)
        chorusAlgoHandle_t h = 0;
        if (chorusLoadBuiltinAlgo(name, n, root, &h) != chorusSuccess)
          return Status(StatusCode::kInternal, chorusGetLastError(nullptr));
        const bool rooted = isRooted(va.value()->algo().collective);
        add(h, *va.value(), rooted ? root : -1);
        if (!rooted || n == 1) break;
      }
    }
  }
  for (const std::string& f : algorithmFiles(a.algos)) {
    auto va = runtime::loadVerifiedFile(f, &compiler::programFiles());
    if (!va.isOk()) return Status(va.status().code(), f + ": " + va.status().message());
    const ir::Algorithm& al = va.value()->algo();
    if (al.ngpus != n ||
        !runtime::CollectiveData::make(al.collective, n, 0, countQuantum(al), DataType::kFloat32,
                                       ReduceOp::kSum, !al.outofplace)
             .isOk())
      continue;
    chorusAlgoHandle_t h = 0;
    if (chorusLoadAlgo(f.c_str(), &h, 0) != chorusSuccess)
      return Status(StatusCode::kInvalidArgument, f + ": " + chorusGetLastError(nullptr));
    add(h, *va.value(), isRooted(al.collective) ? 0 : -1);
  }
  return out;
}

// The next call and its buffers (every rank's, or rank `me`'s): drawn until
// CollectiveData accepts it (an op a type lacks is drawn again). Every rank
// draws the same.
Call draw(std::mt19937_64& rng, const std::vector<Way>& ws, int n, int me, size_t maxBytes,
          std::optional<runtime::CollectiveData>* data) {
  for (;;) {
    Call c;
    c.way = rng() % ws.size();
    const Way& w = ws[c.way];
    c.type = kTypes[rng() % std::size(kTypes)];
    c.op = traits(w.coll).reduces ? kOps[rng() % std::size(kOps)] : ReduceOp::kSum;
    c.inplace = w.inplace && (!w.outofplace || rng() % 2 == 0);
    c.root = w.root >= 0 ? w.root : static_cast<int>(rng() % static_cast<uint64_t>(n));
    // Log-uniform elements, at most maxBytes moved per rank.
    size_t perCall = maxBytes / dataTypeSize(c.type) / ncclTestsFactor(w.coll, n);
    double x =
        std::uniform_real_distribution<double>(0, std::log2(std::max<size_t>(perCall, 2)))(rng);
    c.count = std::max<size_t>(1, static_cast<size_t>(std::exp2(x)));
    c.count = (c.count + w.quantum - 1) / w.quantum * w.quantum;
    const bool coin = rng() % 2 == 0;  // drawn by threads too: the same sequence either way
    c.mapped = me >= 0 && coin;
    auto d = runtime::CollectiveData::make(w.coll, n, c.root, c.count, c.type, c.op, c.inplace, me,
                                           c.mapped);
    if (d.isOk()) {
      data->emplace(std::move(d).value());
      return c;
    }
  }
}

std::string describe(const Call& c, const Way& w) {
  std::string s =
      std::string(w.coll == CollectiveKind::kSend ? "sendrecv" : collectiveName(w.coll)) +
      " count " + std::to_string(c.count) + " " + std::string(dataTypeName(c.type));
  if (traits(w.coll).reduces) s += " " + std::string(reduceOpName(c.op));
  if (isRooted(w.coll)) s += " root " + std::to_string(c.root);
  return s + (c.inplace ? " in place" : " out of place") + (c.mapped ? ", mappable buffers" : "") +
         ", " + w.name;
}

ApiResult issue(const Comm& comm, const Way& w, const Call& c, const runtime::CallArgs& b, int r,
                int n) {
  chorusDataType_t t = api::toC(c.type);
  chorusRedOp_t op = api::toC(c.op);
  if (w.handle != 0) return comm.runAlgo(w.handle, b.sendbuff, b.recvbuff, c.count, t, op, c.root);
  return callCollective(comm, w.coll, b.sendbuff, b.recvbuff, c.count, t, op, c.root, r, n);
}

int relaunch(const SoakArgs& a) {
  LaunchArgs l;
  l.nprocs = a.procs;
  l.command = {"/proc/self/exe", "soak",
               "--calls",        std::to_string(a.calls),
               "--seed",         std::to_string(a.seed),
               "--max-bytes",    std::to_string(a.maxBytes)};
  if (!a.builtins) l.command.push_back("--no-builtins");
  for (const std::string& f : a.algos) l.command.insert(l.command.end(), {"--algo", f});
  return runLaunch(l);
}

}  // namespace

int runSoak(const SoakArgs& a) {
  if (a.procs > 0) return relaunch(a);
  if (a.calls < 1 || a.ranks < 1 || a.maxBytes < 1) {
    std::fprintf(stderr, "chorus soak: need --calls >= 1, --ranks >= 1, --max-bytes >= 1\n");
    return 2;
  }
  // A fixed mmap threshold: glibc otherwise raises it after large frees, and
  // then keeps later large blocks in its arenas after they are freed, which
  // reads as growth without a leak (8 thread ranks, seed 11: +14 MiB in 3
  // runs of 3; with the threshold fixed, none).
  (void)mallopt(M_MMAP_THRESHOLD, 128 << 10);
  std::vector<Comm> comms;
  int n = a.ranks, me = -1;  // me >= 0: one process of a launched job
  if (auto env = runtime::bootstrapConfigFromEnvironment(); env.isOk()) {
    chorusComm_t c = nullptr;
    if (ApiResult r = check(chorusCommInitFromEnv(&c)); !r.ok()) {
      std::fprintf(stderr, "chorus soak: %s\n", r.message.c_str());
      return 3;
    }
    comms.emplace_back(c);
    n = env.value().nranks;
    me = env.value().rank;
  } else if (ApiResult r = Comm::initAll(n, &comms); !r.ok()) {
    std::fprintf(stderr, "chorus soak: %s\n", r.message.c_str());
    return 2;
  }
  auto made = ways(a, n);
  if (!made.isOk()) {
    std::fprintf(stderr, "chorus soak: %s\n", made.status().message().c_str());
    return 2;
  }
  const std::vector<Way> ws = std::move(made).value();
  const bool printer = me <= 0;
  if (printer)
    std::printf(
        "# chorus soak: %ld calls on %d ranks (%s), seed %llu, up to %zu bytes per rank, "
        "%zu ways (collective x algorithm)\n",
        a.calls, n, me < 0 ? "threads" : "processes", static_cast<unsigned long long>(a.seed),
        a.maxBytes, ws.size());
  std::fflush(stdout);

  std::mt19937_64 rng(a.seed);
  const long half = std::max(1L, a.calls / 2);
  Usage atWarm, atEnd;
  std::map<std::string, long> done;  // calls per collective
  uint64_t wrong = 0;
  std::string firstWrong, failure;
  const auto start = Clock::now();
  // Thread ranks: this thread draws, one thread per rank calls, this one checks.
  std::optional<runtime::CollectiveData> data;
  std::vector<ApiResult> results(static_cast<size_t>(n));
  for (long i = 0; i < a.calls && failure.empty() && wrong == 0; ++i) {
    const Call call = draw(rng, ws, n, me, a.maxBytes, &data);
    const Way& w = ws[call.way];
    auto rank = [&](int r) {
      results[static_cast<size_t>(r)] = issue(comms[me < 0 ? static_cast<size_t>(r) : 0], w, call,
                                              data->calls()[static_cast<size_t>(r)], r, n);
    };
    if (me >= 0) {
      rank(me);
    } else {
      std::vector<std::thread> others;
      for (int r = 1; r < n; ++r) others.emplace_back(rank, r);
      rank(0);
      for (auto& t : others) t.join();
    }
    for (int r = 0; r < n; ++r) {
      const ApiResult& res = results[static_cast<size_t>(r)];
      if ((me < 0 || r == me) && !res.ok()) {
        double s = std::chrono::duration<double>(Clock::now() - start).count();
        failure = "rank " + std::to_string(r) + ": call " + std::to_string(i) + " (" +
                  describe(call, w) + ") failed after " + std::to_string(s) + " s: " + res.message;
        break;
      }
    }
    if (failure.empty()) {
      std::string first;
      wrong += data->countWrong(&first);
      if (wrong > 0)
        firstWrong = "call " + std::to_string(i) + " (" + describe(call, w) + "): " + first;
    }
    ++done[w.coll == CollectiveKind::kSend ? "sendrecv" : std::string(collectiveName(w.coll))];
    if (i + 1 == half) {
      atWarm = usage();
      rng.seed(a.seed);  // replay
    }
    if (printer && a.calls >= 1000 && (i + 1) % (a.calls / 10) == 0) {
      Usage u = usage();
      std::printf("# %ld calls, %.1f s, rss %.1f MiB, fds %d\n", i + 1,
                  std::chrono::duration<double>(Clock::now() - start).count(),
                  static_cast<double>(u.rssBytes) / (1 << 20), u.fds);
      std::fflush(stdout);
    }
  }
  data.reset();
  atEnd = usage();
  if (!failure.empty()) {
    std::printf("%s\n", failure.c_str());
    std::fflush(stdout);
    return 3;
  }
  if (wrong > 0) {
    std::printf("rank %d: %llu wrong elements; first: %s\n", std::max(me, 0),
                static_cast<unsigned long long>(wrong), firstWrong.c_str());
    return 1;
  }
  std::string per;
  for (const auto& [k, v] : done) per += " " + k + " " + std::to_string(v);
  const double rssWarm = static_cast<double>(atWarm.rssBytes) / (1 << 20);
  const double rssEnd = static_cast<double>(atEnd.rssBytes) / (1 << 20);
  // Allocator noise is a few MiB; a leak per call would be far more.
  const bool grew = atEnd.fds > atWarm.fds || (kJudgeMemory && rssEnd > rssWarm + 8);
  std::printf(
      "%s%ld calls checked, 0 wrong in %.1f s;%s; rss %.1f MiB after call %ld -> %.1f MiB "
      "after its replay; fds %d -> %d%s\n",
      me >= 0 ? ("rank " + std::to_string(me) + ": ").c_str() : "", a.calls,
      std::chrono::duration<double>(Clock::now() - start).count(), per.c_str(), rssWarm, half,
      rssEnd, atWarm.fds, atEnd.fds,
      grew           ? " GREW"
      : kJudgeMemory ? ""
                     : " (memory not judged under AddressSanitizer)");
  return grew ? 1 : 0;
}

}  // namespace chorus::cli
