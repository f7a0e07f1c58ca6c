// `chorus perf COLL`: nccl-tests' *_perf for Chorus. Ranks are threads of
// this process, each driving its own communicator through the C API (the
// same path a user's program takes). One row per size with out-of-place and
// in-place time, algbw, busbw (nccl-tests' formulas) and #wrong; busbw is
// also shown as a fraction of this machine's memcpy bandwidth, measured at
// start.
#include <algorithm>
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "algorithms/classic.h"
#include "api/convert.h"
#include "api/world.h"
#include "chorus/chorus.hpp"
#include "compiler/program_file.h"
#include "core/collectives.h"
#include "runtime/bootstrap/bootstrap.h"
#include "runtime/device_backend.h"
#include "runtime/exec/check.h"
#include "runtime/exec/flat_plan.h"
#include "runtime/plan/planner.h"
#include "runtime/plan/selection.h"
#include "tools/chorus/calls.h"
#include "tools/chorus/commands.h"
#include "tools/chorus/device.h"

namespace chorus::cli {

namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

struct Measure {
  double us = 0;
  double p50 = 0, p99 = 0;  // --percentiles: per call, us
  size_t wrong = 0;
  std::string error;
  double memFrac = -1;  // --device: bytes the steps moved per second / copy bandwidth
  std::string algo;     // --device: the algorithm(s) that ran, "name/protocol" joined by '+'
};

// Runs one form (in place or not) of one size: warm-up, timed calls,
// then (with --check) one call on fresh inputs, checked element by element.
// The ranks this process drives: all of them as threads (me < 0), or one
// rank `me` of a multi-process job, whose ranks meet through a one-element
// allreduce (the barrier) and sum their #wrong the same way.
struct Local {
  std::vector<Comm> comms;  // by rank (threads), or just this process's rank
  int nranks = 0;
  int me = -1;
  const Comm& comm(int r) const { return comms[me < 0 ? static_cast<size_t>(r) : 0]; }
};

Measure measure(const PerfArgs& a, CollectiveKind coll, const Local& local, chorusAlgoHandle_t algo,
                size_t count, DataType type, ReduceOp op, bool inplace) {
  const int n = local.nranks;
  Measure m;
  // Processes: buffers from chorusMemAlloc's allocator, which peers read in
  // place (threads share memory anyway). The runtime (and an explicit
  // algorithm) counts gather and scatter over the whole vector.
  const size_t runtimeCount = countsWholeVector(coll) ? count * static_cast<size_t>(n) : count;
  auto data = runtime::CollectiveData::make(coll, n, a.root, runtimeCount, type, op, inplace,
                                            local.me, local.me >= 0 && !a.heapBuffers);
  if (!data.isOk()) {
    m.error = data.status().message();
    return m;
  }
  runtime::CollectiveData& d = data.value();
  chorusDataType_t ct = api::toC(type);
  chorusRedOp_t cop = api::toC(op);
  auto call = [&](int r) -> ApiResult {
    const runtime::CallArgs& c = d.calls()[static_cast<size_t>(r)];
    const Comm& comm = local.comm(r);
    if (algo > 0) return comm.runAlgo(algo, c.sendbuff, c.recvbuff, runtimeCount, ct, cop, a.root);
    return callCollective(comm, coll, c.sendbuff, c.recvbuff, count, ct, cop, a.root, r, n);
  };
  std::barrier threads(local.me < 0 ? n : 1);
  auto sync = [&](int r) {
    if (local.me < 0) {
      threads.arrive_and_wait();
      return;
    }
    int32_t token = 0;
    (void)local.comm(r).allReduce(&token, &token, 1, chorusInt32, chorusSum);
  };
  std::vector<std::string> errors(static_cast<size_t>(n));
  Clock::time_point t0, t1;
  std::vector<double> perCall;                    // --percentiles: the timing rank's, us
  const int timer = local.me < 0 ? 0 : local.me;  // the rank whose clock counts here
  auto rank = [&](int r) {
    auto fail = [&](const ApiResult& res) {
      if (!res.ok() && errors[static_cast<size_t>(r)].empty())
        errors[static_cast<size_t>(r)] = "rank " + std::to_string(r) + ": " + res.message;
      return !res.ok();
    };
    bool failed = false;
    for (int i = 0; i < a.warmup && !failed; ++i) failed = fail(call(r));
    sync(r);
    if (r == timer) t0 = Clock::now();
    if (r == timer && a.percentiles) {
      for (int i = 0; i < a.iters && !failed; ++i) {
        const Clock::time_point c0 = Clock::now();
        failed = fail(call(r));
        perCall.push_back(seconds(Clock::now() - c0) * 1e6);
      }
    } else {
      for (int i = 0; i < a.iters && !failed; ++i) failed = fail(call(r));
    }
    sync(r);
    if (r == timer) t1 = Clock::now();
    if (!a.check || failed) return;
    if (r == timer) d.reset();
    sync(r);
    fail(call(r));
  };
  if (local.me >= 0) {
    rank(local.me);
  } else {
    std::vector<std::thread> others;
    for (int r = 1; r < n; ++r) others.emplace_back(rank, r);
    rank(0);
    for (auto& t : others) t.join();
  }
  for (const std::string& e : errors)
    if (!e.empty()) {
      m.error = e;
      return m;
    }
  m.us = seconds(t1 - t0) * 1e6 / std::max(1, a.iters);
  if (!perCall.empty()) {
    // Nearest rank: the smallest time at least p of the calls took no
    // longer than.
    std::sort(perCall.begin(), perCall.end());
    auto at = [&](double p) {
      const auto k = static_cast<size_t>(std::ceil(p * static_cast<double>(perCall.size())));
      return perCall[std::min(perCall.size(), std::max<size_t>(k, 1)) - 1];
    };
    m.p50 = at(0.5);
    m.p99 = at(0.99);
  }
  if (a.check) {
    uint64_t wrong = d.countWrong();
    if (local.me >= 0)
      (void)local.comm(local.me).allReduce(&wrong, &wrong, 1, chorusUint64, chorusSum);
    m.wrong = wrong;
  }
  return m;
}

// What --device runs: the backend, the explicit algorithm (or none:
// selection by size as the C API does) and each algorithm's plan.
struct DeviceRun {
  Backend* backend = nullptr;
  std::shared_ptr<const runtime::VerifiedAlgorithm> algo;
  std::unique_ptr<runtime::BuiltinCache> builtins;
  std::map<const runtime::VerifiedAlgorithm*, runtime::FlatPlan> plans;
};

// measure() for --device engine|cuda: the same sequence (warm-up, timed
// calls, one checked call on fresh inputs) with every rank's part of a
// call enqueued together, as one launch per algorithm part.
Measure measureOnDevice(const PerfArgs& a, CollectiveKind coll, int n, DeviceRun& dev, size_t count,
                        DataType type, ReduceOp op, bool inplace) {
  Measure m;
  Backend& b = *dev.backend;
  auto data = runtime::CollectiveData::make(coll, n, a.root, count, type, op, inplace);
  if (!data.isOk()) {
    m.error = data.status().message();
    return m;
  }
  runtime::CollectiveData& d = data.value();
  runtime::SelectionRequest req;
  req.collective = coll;
  req.nranks = n;
  req.inplace = inplace;
  req.count = count;
  req.type = type;
  req.op = op;
  req.root = isRooted(coll) ? a.root : -1;
  req.sharedMemory = false;  // as GPU worlds choose (api/world.cc)
  req.gpu = true;
  req.gpuLLBytes = api::WorldOptions::fromEnvironment().gpuLLBytes;
  auto parts = runtime::planParts(req, dev.algo, api::globalRegistry(), *dev.builtins, nullptr);
  auto failed = [&](const Status& st) {
    m.error = st.message();
    return m;
  };
  if (!parts.isOk()) return failed(parts.status());
  if (Status st = b.bind(d.calls(), coll, n); !st.isOk()) return failed(st);
  if (Status st = b.upload(); !st.isOk()) return failed(st);
  double moved = 0;
  std::vector<std::vector<runtime::CallArgs>> partCalls;
  for (const runtime::PlanPart& p : parts.value()) {
    std::vector<runtime::CallArgs> calls;
    for (const runtime::CallArgs& c : b.calls()) calls.push_back(runtime::partArgs(c, p));
    auto g = runtime::planCall(*p.va, calls, 0);
    if (!g.isOk()) return failed(g.status());
    auto it = dev.plans.find(p.va.get());
    if (it == dev.plans.end())
      it = dev.plans.emplace(p.va.get(), runtime::FlatPlan::lower(*p.va)).first;
    const ir::Protocol proto = b.protocolFor(*p.va, p.protocol);
    moved += it->second.bytesMoved(g.value(), proto);
    if (!m.algo.empty()) m.algo += "+";
    m.algo += p.va->algo().name + "/" + std::string(ir::protocolName(proto));
    partCalls.push_back(std::move(calls));
  }
  auto call = [&]() -> Status {
    for (size_t i = 0; i < partCalls.size(); ++i)
      if (Status st = b.enqueue(*parts.value()[i].va, partCalls[i], parts.value()[i].protocol);
          !st.isOk())
        return st;
    return Status::ok();
  };
  auto calls = [&](int k) -> Status {
    for (int i = 0; i < k; ++i)
      if (Status st = call(); !st.isOk()) return st;
    return b.wait();
  };
  if (Status st = calls(a.warmup); !st.isOk()) return failed(st);
  auto t0 = Clock::now();
  if (Status st = calls(a.iters); !st.isOk()) return failed(st);
  m.us = seconds(Clock::now() - t0) * 1e6 / std::max(1, a.iters);
  m.memFrac = moved / (m.us * 1e-6) / b.copyBandwidth();
  if (!a.check) return m;
  d.reset();
  if (Status st = b.upload(); !st.isOk()) return failed(st);
  if (Status st = calls(1); !st.isOk()) return failed(st);
  if (Status st = b.download(); !st.isOk()) return failed(st);
  m.wrong = d.countWrong();
  return m;
}

// One call form's cells of a row: time, algbw, busbw, fraction of memcpy,
// #wrong; blank ("-" in the table) for a form the algorithm does not serve.
std::string formCells(bool served, const Measure& m, double alg, double bus, double memBw,
                      bool check, bool csv) {
  char buf[128];
  std::string wrong = check ? std::to_string(m.wrong) : "N/A";
  double mem = m.memFrac >= 0 ? m.memFrac : bus / memBw;
  if (csv && served)
    std::snprintf(buf, sizeof buf, "%.3f,%.4f,%.4f,%.4f,%s", m.us, alg, bus, mem,
                  check ? wrong.c_str() : "");
  else if (csv)
    std::snprintf(buf, sizeof buf, ",,,,");
  else if (served)
    std::snprintf(buf, sizeof buf, " %9.1f %7.3f %7.3f %5.2f %6s", m.us, alg, bus, mem,
                  wrong.c_str());
  else
    std::snprintf(buf, sizeof buf, " %9s %7s %7s %5s %6s", "-", "-", "-", "-", "-");
  return buf;
}

}  // namespace

namespace {

// `chorus perf ... --procs N`: the same command as N processes.
int relaunch(const PerfArgs& a) {
  LaunchArgs l;
  l.nprocs = a.procs;
  l.command = {"/proc/self/exe",
               "perf",
               a.collective,
               "-b",
               std::to_string(a.minBytes),
               "-e",
               std::to_string(a.maxBytes),
               "-f",
               std::to_string(a.factor),
               "-n",
               std::to_string(a.iters),
               "-w",
               std::to_string(a.warmup),
               "--dtype",
               a.dtype,
               "--op",
               a.op,
               "--root",
               std::to_string(a.root)};
  if (!a.algo.empty()) l.command.insert(l.command.end(), {"--algo", a.algo});
  if (a.check) l.command.push_back("--check");
  if (a.csv) l.command.push_back("--csv");
  if (a.heapBuffers) l.command.push_back("--heap-buffers");
  if (a.percentiles) l.command.push_back("--percentiles");
  return runLaunch(l);
}

}  // namespace

int runPerf(const PerfArgs& a) {
  if (a.procs > 0) return relaunch(a);
  // sendrecv (nccl-tests' sendrecv_perf) is chorusSend/chorusRecv around a
  // ring; it goes by kSend here.
  const bool sendRecv = a.collective == "sendrecv";
  CollectiveKind coll = sendRecv ? CollectiveKind::kSend : parseCollective(a.collective);
  const bool rootedOnly = countsWholeVector(coll);  // not NCCL's, only Chorus's C API
  if (!isNcclCollective(coll) && !sendRecv && !rootedOnly) {
    std::fprintf(stderr,
                 "chorus perf: unknown collective '%s' (allreduce allgather reducescatter "
                 "alltoall broadcast reduce gather scatter sendrecv)\n",
                 a.collective.c_str());
    return 2;
  }
  if (sendRecv && !a.algo.empty()) {
    std::fprintf(stderr, "chorus perf: sendrecv takes no --algo\n");
    return 2;
  }
  auto type = parseDataType(a.dtype);
  auto op = parseReduceOp(a.op);
  if (!type || !op) {
    std::fprintf(stderr, "chorus perf: unknown %s '%s'\n", type ? "op" : "dtype",
                 type ? a.op.c_str() : a.dtype.c_str());
    return 2;
  }
  if (a.ranks < 1 || a.minBytes == 0 || a.maxBytes < a.minBytes || a.factor < 2 || a.root < 0) {
    std::fprintf(stderr,
                 "chorus perf: need --ranks >= 1, 0 < -b <= -e, -f >= 2, 0 <= --root < ranks\n");
    return 2;
  }
  Local local;
  double initMs = -1;  // processes: the slowest rank's chorusCommInitFromEnv, in ms
  const bool onDevice = a.dev.device != "cpu";
  DeviceRun dev;
  std::unique_ptr<Backend> backend;
  if (onDevice) {
    // Every rank in this process, its calls enqueued together.
    if (sendRecv || rootedOnly || a.procs > 0 || a.percentiles) {
      std::fprintf(stderr,
                   "chorus perf: --device runs the collectives of one process's ranks, queued "
                   "(no sendrecv, gather or scatter; no --procs, no --percentiles)\n");
      return 2;
    }
    BackendOptions bo;
    bo.dev = a.dev;
    auto made = Backend::make(bo);
    if (!made.isOk()) {
      std::fprintf(stderr, "chorus perf: %s\n", made.status().message().c_str());
      return 2;
    }
    backend = std::move(made).value();
    dev.backend = backend.get();
    dev.builtins = std::make_unique<runtime::BuiltinCache>(a.ranks);
    local.nranks = a.ranks;
  } else if (auto env = runtime::bootstrapConfigFromEnvironment(); env.isOk()) {
    // One rank of a multi-process job (chorus launch, torchrun, mpirun).
    chorusComm_t c = nullptr;
    const auto t0 = std::chrono::steady_clock::now();
    if (ApiResult r = check(chorusCommInitFromEnv(&c)); !r.ok()) {
      std::fprintf(stderr, "chorus perf: %s\n", r.message.c_str());
      return 2;
    }
    // How long joining took (docs/scale.md): the slowest rank's, from when
    // its process asked to when its communicator was ready.
    initMs =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (ApiResult r =
            check(chorusAllReduce(&initMs, &initMs, 1, chorusFloat64, chorusMax, c, nullptr));
        !r.ok()) {
      std::fprintf(stderr, "chorus perf: %s\n", r.message.c_str());
      return 2;
    }
    local.comms.emplace_back(c);
    local.nranks = env.value().nranks;
    local.me = env.value().rank;
  } else if (ApiResult r = Comm::initAll(a.ranks, &local.comms); !r.ok()) {
    std::fprintf(stderr, "chorus perf: %s\n", r.message.c_str());
    return 2;
  } else {
    local.nranks = a.ranks;
  }
  const bool printer = local.me <= 0;  // rank 0 (or the only process) prints
  if (a.root >= local.nranks) {
    std::fprintf(stderr, "chorus perf: --root %d is not one of the %d ranks\n", a.root,
                 local.nranks);
    return 2;
  }
  chorusAlgoHandle_t algo = 0;
  // Out-of-place, in-place (sendrecv: a buffer is not sent and received into at once).
  bool served[2] = {true, !sendRecv};
  const bool algoFile =
      a.algo.find('.') != std::string::npos || a.algo.find('/') != std::string::npos;
  // A file or a built-in may serve one call form only (direct_alltoall:
  // out of place): measure the forms it serves, "-" for the other.
  if (!a.algo.empty() && algoFile) {
    if (auto va = runtime::loadVerifiedFile(a.algo, &compiler::programFiles()); va.isOk()) {
      served[0] = va.value()->algo().outofplace;
      served[1] = va.value()->algo().inplace;
    }
  } else if (!a.algo.empty() && !sendRecv) {
    if (auto al = algorithms::makeClassic(a.algo, local.nranks, a.root); al.isOk()) {
      served[0] = al.value().outofplace;
      served[1] = al.value().inplace;
    }
  }
  if (!a.algo.empty() && onDevice) {
    auto va = algoFile ? runtime::loadVerifiedFile(a.algo, &compiler::programFiles())
                       : dev.builtins->get(a.algo, a.root);
    if (!va.isOk()) {
      std::fprintf(stderr, "chorus perf: --algo %s: %s\n", a.algo.c_str(),
                   va.status().message().c_str());
      return 2;
    }
    dev.algo = va.value();
  } else if (!a.algo.empty()) {
    chorusResult_t res = algoFile
                             ? chorusLoadAlgo(a.algo.c_str(), &algo, 0)
                             : chorusLoadBuiltinAlgo(a.algo.c_str(), local.nranks, a.root, &algo);
    if (res != chorusSuccess) {
      std::fprintf(stderr, "chorus perf: --algo %s: %s\n", a.algo.c_str(),
                   chorusGetLastError(nullptr));
      return 2;
    }
  }

  // Only the printing rank measures memcpy (the others would disturb it).
  double memBw = onDevice  ? backend->copyBandwidth() / 1e9
                 : printer ? runtime::memcpyBandwidth() / 1e9
                           : 1.0;
  size_t esz = dataTypeSize(*type);
  const std::string redop = traits(coll).reduces ? a.op : "none";
  const int root = isRooted(coll) ? a.root : -1;
  if (!printer) {
    // Another rank prints.
  } else if (a.csv) {
    std::printf(
        "collective,ranks,size_bytes,count,type,redop,root,oop_time_us,oop_algbw_gbs,"
        "oop_busbw_gbs,oop_busbw_frac_memcpy,oop_wrong,ip_time_us,ip_algbw_gbs,ip_busbw_gbs,"
        "ip_busbw_frac_memcpy,ip_wrong,memcpy_gbs%s%s\n",
        onDevice ? ",algorithm" : "",
        a.percentiles ? ",oop_p50_us,oop_p99_us,ip_p50_us,ip_p99_us" : "");
  } else {
    const char* t = std::getenv("CHORUS_TRANSPORT");
    std::string transport = t == nullptr || *t == '\0' || std::string_view(t) == "auto"
                                ? "shared memory within a host, TCP across hosts"
                            : std::string(t) == "tcp" ? "TCP"
                                                      : "shared memory";
    std::printf("# chorus perf %s: %d ranks (%s), %s, iters %d, warmup %d%s\n",
                a.collective.c_str(), local.nranks,
                onDevice       ? ("--device " + a.dev.device).c_str()
                : local.me < 0 ? "threads of one process"
                               : ("processes: " + transport).c_str(),
                a.algo.empty() ? "automatic selection" : a.algo.c_str(), a.iters, a.warmup,
                a.check ? ", checked" : "");
    if (onDevice) {
      std::printf("# device: %s\n", backend->describe().c_str());
      std::printf(
          "# copy bandwidth: %.2f GB/s (%s); mem = bytes the steps read and write per second / "
          "copy bandwidth\n",
          memBw, backend->copyBandwidthHow().c_str());
    } else {
      std::printf("# memcpy bandwidth: %.2f GB/s (64 MiB, best of 5); mem = busbw / memcpy\n",
                  memBw);
      if (local.me >= 0)
        std::printf("# buffers: %s\n", a.heapBuffers ? "heap (--heap-buffers)"
                                                     : "chorusMemAlloc (peers read them in place)");
      if (initMs >= 0)
        std::printf("# init: %.1f ms (chorusCommInitFromEnv, the slowest of %d ranks)\n", initMs,
                    local.nranks);
    }
    if (a.percentiles)
      std::printf(
          "# p50, p99: median and 99th percentile time per call on rank %d (oop, then ip)\n",
          std::max(0, local.me));
    std::printf("#%74s %36s\n", "out-of-place", "in-place");
    std::printf("# %10s %12s %6s %6s %5s %9s %7s %7s %5s %6s %9s %7s %7s %5s %6s%s\n", "size",
                "count", "type", "redop", "root", "time", "algbw", "busbw", "mem", "#wrong", "time",
                "algbw", "busbw", "mem", "#wrong", onDevice ? "  algorithm/protocol" : "");
    std::printf("# %10s %12s %6s %6s %5s %9s %7s %7s %5s %6s %9s %7s %7s %5s %6s\n", "(B)",
                "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "", "(us)", "(GB/s)",
                "(GB/s)", "", "");
  }
  double busSum = 0, memSum = 0;  // per row, the mean of its call forms'
  int rows = 0;
  size_t wrongTotal = 0;
  int status = 0;
  for (size_t bytes = a.minBytes; bytes <= a.maxBytes; bytes *= static_cast<size_t>(a.factor)) {
    size_t m = ncclTestsFactor(coll, local.nranks);
    size_t count = bytes / esz / m;
    if (count == 0) continue;
    size_t size = count * m * esz;
    Measure forms[2];
    bool inplaceForms[2] = {false, true};
    for (int f = 0; f < 2; ++f) {
      if (!served[f]) continue;
      forms[f] =
          onDevice ? measureOnDevice(a, coll, local.nranks, dev, count, *type, *op, inplaceForms[f])
                   : measure(a, coll, local, algo, count, *type, *op, inplaceForms[f]);
      if (!forms[f].error.empty()) {
        std::fprintf(stderr, "chorus perf: %zu bytes, %s: %s\n", bytes,
                     f ? "in-place" : "out-of-place", forms[f].error.c_str());
        status = 2;
      }
    }
    if (status == 2) break;
    double alg[2] = {0, 0}, bus[2] = {0, 0};
    int measured = 0;
    double busRow = 0, memRow = 0;
    for (int f = 0; f < 2; ++f) {
      if (!served[f]) continue;
      alg[f] = static_cast<double>(size) / (forms[f].us * 1e-6) / 1e9;
      bus[f] = alg[f] * busBandwidthFactor(coll, local.nranks);
      wrongTotal += forms[f].wrong;
      busRow += bus[f];
      memRow += forms[f].memFrac >= 0 ? forms[f].memFrac : bus[f] / memBw;  // (the mem column)
      ++measured;
    }
    busSum += busRow / measured;
    memSum += memRow / measured;
    ++rows;
    std::string cells[2];
    for (int f = 0; f < 2; ++f)
      cells[f] = formCells(served[f], forms[f], alg[f], bus[f], memBw, a.check, a.csv);
    // The algorithm each form ran (--device), once where both ran the same.
    std::string ran = forms[served[0] ? 0 : 1].algo;
    if (served[0] && served[1] && forms[1].algo != forms[0].algo) ran += " | " + forms[1].algo;
    std::string tails;  // --percentiles
    for (int f = 0; f < 2 && a.percentiles; ++f) {
      char buf[64];
      if (!served[f])
        std::snprintf(buf, sizeof buf, a.csv ? ",," : " %9s %9s", "-", "-");
      else
        std::snprintf(buf, sizeof buf, a.csv ? ",%.3f,%.3f" : " %9.1f %9.1f", forms[f].p50,
                      forms[f].p99);
      tails += buf;
    }
    if (!printer) {
      // Another rank prints.
    } else if (a.csv) {
      std::printf("%s,%d,%zu,%zu,%s,%s,%d,%s,%s,%.3f%s%s\n", a.collective.c_str(), local.nranks,
                  size, count, a.dtype.c_str(), redop.c_str(), root, cells[0].c_str(),
                  cells[1].c_str(), memBw, onDevice ? ("," + ran).c_str() : "", tails.c_str());
    } else {
      std::printf("  %10zu %12zu %6s %6s %5d%s%s%s%s\n", size, count, a.dtype.c_str(),
                  redop.c_str(), root, cells[0].c_str(), cells[1].c_str(), tails.c_str(),
                  onDevice ? ("  " + ran).c_str() : "");
    }
    std::fflush(stdout);
    if (bytes > a.maxBytes / static_cast<size_t>(a.factor)) break;
  }
  if (algo > 0) chorusUnloadAlgo(algo);
  if (printer && !a.csv && rows > 0) {
    if (a.check)
      std::printf("# Out of bounds values : %zu %s\n", wrongTotal, wrongTotal ? "FAILED" : "OK");
    // The mean of the mem column: on a device the bytes the steps move over
    // the copy bandwidth, not busbw over it (which read 0.03 where every
    // large row of an H200's allreduce read 0.72).
    std::printf("# Avg bus bandwidth    : %.3f GB/s (mem %.2f of %s)\n", busSum / rows,
                memSum / rows, onDevice ? "the copy bandwidth" : "memcpy");
  }
  if (status != 0) return status;
  return a.check && wrongTotal > 0 ? 1 : 0;
}

}  // namespace chorus::cli
