// Ranks that meet through chorusGetUniqueId, as NCCL programs do: this
// process makes the id, runs ranks 0..T-1 on threads of its own and starts
// the others as child processes that get the id's bytes (here through an
// environment variable; MPI programs broadcast them). Every rank checks an
// allreduce, an allgather, a ring of sends and receives, a gather and a
// scatter of values distinct per rank and element, that the communicator
// has the right size and rank, a split of it by parity, and a shrink that
// leaves the last rank out.
//
//   uniqueid_probe N T   N ranks, T of them threads of this process (1..N)
//
// PROBE_DEVICE=D: every rank on device D (chorusCommInitRankDevice; but rank
// PROBE_HOST_RANK on the host), and the allreduce at more sizes
// (small calls on LL's slots, larger ones growing the connections). With
// CHORUS_DEVICE_BACKEND=engine this is the GPU path of process ranks on the
// step engine, without a GPU. On a real GPU (built with CUDA, and
// CHORUS_DEVICE_BACKEND not "engine") the buffers are CUDA managed memory,
// which the ranks' kernels take and this program reads after the device is
// idle; on the host and the step engine they are host memory.
//
// Exit 0 only if every rank, here and in the children, saw the right data.
#include <chorus/chorus.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef CHORUS_PROBE_CUDA
#include <cuda_runtime.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

// Whether this rank's buffers must be a real GPU's memory (see the top).
bool onRealGpu(int device) {
#ifdef CHORUS_PROBE_CUDA
  const char* backend = std::getenv("CHORUS_DEVICE_BACKEND");
  return device >= 0 && (backend == nullptr || std::strcmp(backend, "engine") != 0);
#else
  (void)device;
  return false;
#endif
}

// `n` elements of `v` in host memory, or in CUDA managed memory.
template <class T>
class Buffer {
 public:
  Buffer(size_t n, T v, bool managed) : n_(n), managed_(managed) {
#ifdef CHORUS_PROBE_CUDA
    if (managed_) {
      void* raw = nullptr;
      if (cudaMallocManaged(&raw, std::max<size_t>(n, 1) * sizeof(T)) != cudaSuccess) {
        std::printf("cudaMallocManaged of %zu bytes failed\n", n * sizeof(T));
        std::exit(1);
      }
      p_ = static_cast<T*>(raw);
    }
#endif
    if (!managed_) p_ = new T[std::max<size_t>(n, 1)];
    std::fill(p_, p_ + n, v);
  }
  ~Buffer() {
#ifdef CHORUS_PROBE_CUDA
    if (managed_) {
      cudaFree(p_);
      return;
    }
#endif
    delete[] p_;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  T* data() { return p_; }
  size_t size() const { return n_; }
  T& operator[](size_t i) { return p_[i]; }
  bool operator==(const Buffer& o) const { return n_ == o.n_ && std::equal(p_, p_ + n_, o.p_); }

 private:
  size_t n_;
  bool managed_;
  T* p_ = nullptr;
};

// Before the host reads what a call wrote: the device's work done.
void settle(bool managed) {
#ifdef CHORUS_PROBE_CUDA
  if (managed) cudaDeviceSynchronize();
#else
  (void)managed;
#endif
}

int killedPeer(chorusComm_t comm, int n, int rank, bool managed) {
  Buffer<float> buf(size_t{1} << 16, 1.0F, managed);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 1000000; ++i) {
    if (rank == n - 1 && i == 20)
      std::thread([] {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        ::raise(SIGKILL);
      }).detach();
    chorusResult_t r =
        chorusAllReduce(buf.data(), buf.data(), buf.size(), chorusFloat, chorusSum, comm, nullptr);
    std::string why = r == chorusSuccess ? "" : chorusGetLastError(comm);
    chorusResult_t async = chorusSuccess;
    if (r == chorusSuccess && chorusCommGetAsyncError(comm, &async) == chorusSuccess &&
        async != chorusSuccess) {
      r = async;
      why = chorusGetLastError(comm);
    }
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (r != chorusSuccess) {
      std::printf("rank %d: call %d failed after %.1f s: %s\n", rank, i, s, why.c_str());
      chorusCommAbort(comm);
      return 0;
    }
    if (s > 60) break;
  }
  std::printf("rank %d: no call failed\n", rank);
  return 1;
}

// One rank's work; returns 0 if all it saw was right.
int runRank(const chorusUniqueId& id, int n, int rank) {
  chorusComm_t comm = nullptr;
  const char* deviceText = std::getenv("PROBE_DEVICE");
  const char* hostRank = std::getenv("PROBE_HOST_RANK");  // that rank stays on the host
  const int device = deviceText == nullptr || (hostRank != nullptr && std::atoi(hostRank) == rank)
                         ? -1
                         : std::atoi(deviceText);
  if (chorusCommInitRankDevice(&comm, n, id, rank, device) != chorusSuccess) {
    std::printf("rank %d: init failed: %s\n", rank, chorusGetLastError(nullptr));
    return 1;
  }
  int count = 0, me = -1, bad = 0;
  chorusCommCount(comm, &count);
  chorusCommUserRank(comm, &me);
  if (count != n || me != rank) {
    std::printf("rank %d: communicator says rank %d of %d\n", rank, me, count);
    bad = 1;
  }
  // PROBE_END=abort (the children inherit it): end with chorusCommAbort
  // right after init, which must work on process communicators as on
  // thread ones. No collective first: an abort ends peers' calls in flight.
  const char* end = std::getenv("PROBE_END");
  if (end != nullptr && std::strcmp(end, "abort") == 0) {
    if (chorusCommAbort(comm) != chorusSuccess) {
      std::printf("rank %d: abort failed: %s\n", rank, chorusGetLastError(nullptr));
      bad = 1;
    }
    if (bad == 0) std::printf("rank %d of %d: ok\n", rank, n);
    return bad;
  }
  // PROBE_END=kill: the last rank kills itself (SIGKILL) in the middle of
  // a stream of allreduces; every other rank's calls must then fail
  // naming it, well within the timeout.
  const bool managed = onRealGpu(device);
  if (end != nullptr && std::strcmp(end, "kill") == 0) return killedPeer(comm, n, rank, managed);
  const size_t len = 3000;
  Buffer<int32_t> mine(len, 0, managed), sum(len, 0, managed),
      all(len * static_cast<size_t>(n), 0, managed);
  for (size_t i = 0; i < len; ++i) mine[i] = rank * 100000 + static_cast<int32_t>(i);
  chorusResult_t r =
      chorusAllReduce(mine.data(), sum.data(), len, chorusInt32, chorusSum, comm, nullptr);
  if (r == chorusSuccess)
    r = chorusAllGather(mine.data(), all.data(), len, chorusInt32, comm, nullptr);
  // And a ring of sends and receives (to the next rank, from the previous).
  Buffer<int32_t> fromPrev(len, -1, managed);
  if (r == chorusSuccess) {
    chorusGroupStart();
    chorusSend(mine.data(), len, chorusInt32, (rank + 1) % n, comm, nullptr);
    chorusRecv(fromPrev.data(), len, chorusInt32, (rank + n - 1) % n, comm, nullptr);
    r = chorusGroupEnd();
  }
  // Allreduces of other sizes (devices: LL slots up to 64 KiB, then larger
  // connections), each value distinct per rank and element, sums exact.
  for (size_t big : {size_t{40}, size_t{70000}, size_t{300001}, size_t{5000}}) {
    if (deviceText == nullptr || r != chorusSuccess) break;  // (every rank, host ones too)
    Buffer<float> x(big, 0.0F, managed), y(big, -1.0F, managed);
    for (size_t i = 0; i < big; ++i)
      x[i] = static_cast<float>(rank * 1024 + static_cast<int>(i % 1000));
    r = chorusAllReduce(x.data(), y.data(), big, chorusFloat32, chorusSum, comm, nullptr);
    chorusResult_t async = chorusSuccess;
    settle(managed);
    if (r == chorusSuccess && chorusCommGetAsyncError(comm, &async) == chorusSuccess)
      r = async;  // (the device calls' failures show here)
    for (size_t i = 0; i < big && r == chorusSuccess; ++i) {
      const float want =
          static_cast<float>(1024 * (n * (n - 1) / 2) + n * static_cast<int>(i % 1000));
      if (y[i] != want) {
        std::printf("rank %d: allreduce of %zu: element %zu is %g, want %g\n", rank, big, i,
                    static_cast<double>(y[i]), static_cast<double>(want));
        bad = 1;
        break;
      }
    }
  }
  settle(managed);
  if (r != chorusSuccess) {
    std::printf("rank %d: collective failed: %s\n", rank, chorusGetLastError(nullptr));
    bad = 1;
  }
  for (size_t i = 0; i < len && bad == 0; ++i) {
    int32_t want = n * static_cast<int32_t>(i) + 100000 * (n * (n - 1) / 2);
    if (sum[i] != want) {
      std::printf("rank %d: allreduce element %zu is %d, want %d\n", rank, i, sum[i], want);
      bad = 1;
    }
    if (fromPrev[i] != (rank + n - 1) % n * 100000 + static_cast<int32_t>(i)) {
      std::printf("rank %d: element %zu from the previous rank is wrong\n", rank, i);
      bad = 1;
    }
    for (int p = 0; p < n; ++p)
      if (all[static_cast<size_t>(p) * len + i] != p * 100000 + static_cast<int32_t>(i)) {
        std::printf("rank %d: allgather block %d element %zu is wrong\n", rank, p, i);
        bad = 1;
        break;
      }
  }
  // Gather to rank 0 and scatter from the last rank, the other ranks passing
  // NULL for the buffer only the root uses.
  Buffer<int32_t> gathered(len * static_cast<size_t>(n), -1, managed), piece(len, -1, managed);
  if (bad == 0 && (chorusGather(mine.data(), rank == 0 ? gathered.data() : nullptr, len,
                                chorusInt32, 0, comm, nullptr) != chorusSuccess ||
                   chorusScatter(rank == n - 1 ? all.data() : nullptr, piece.data(), len,
                                 chorusInt32, n - 1, comm, nullptr) != chorusSuccess)) {
    std::printf("rank %d: gather/scatter failed: %s\n", rank, chorusGetLastError(nullptr));
    bad = 1;
  }
  settle(managed);
  for (size_t i = 0; i < len && bad == 0; ++i) {
    if (rank == 0 && !(gathered == all)) {
      std::printf("rank 0: gathered blocks differ from the allgather's\n");
      bad = 1;
    }
    if (piece[i] != rank * 100000 + static_cast<int32_t>(i)) {
      std::printf("rank %d: scattered element %zu is %d\n", rank, i, piece[i]);
      bad = 1;
    }
  }
  // Split by parity, the higher ranks first; each half sums its parent ranks.
  chorusComm_t half = nullptr;
  if (bad == 0 && chorusCommSplit(comm, rank % 2, -rank, &half) != chorusSuccess) {
    std::printf("rank %d: split failed: %s\n", rank, chorusGetLastError(nullptr));
    bad = 1;
  }
  if (half != nullptr) {
    int size = 0, sub = -1, wantSize = 0, wantRank = 0;
    int32_t want = 0;
    Buffer<int32_t> v(1, rank, managed), total(1, 0, managed);
    for (int q = rank % 2; q < n; q += 2) {
      ++wantSize;
      want += q;
      if (q > rank) ++wantRank;
    }
    chorusCommCount(half, &size);
    chorusCommUserRank(half, &sub);
    const chorusResult_t got =
        chorusAllReduce(v.data(), total.data(), 1, chorusInt32, chorusSum, half, nullptr);
    settle(managed);
    if (got != chorusSuccess || size != wantSize || sub != wantRank || total[0] != want) {
      std::printf("rank %d: split: rank %d of %d summing to %d, want %d of %d summing to %d (%s)\n",
                  rank, sub, size, total[0], wantRank, wantSize, want, chorusGetLastError(nullptr));
      bad = 1;
    }
    if (chorusCommDestroy(half) != chorusSuccess) bad = 1;
  }
  // Shrink the last rank away (it does not call); the others sum their ranks.
  if (bad == 0 && n > 2 && rank != n - 1) {
    const int last[1] = {n - 1};
    chorusComm_t rest = nullptr;
    Buffer<int32_t> v(1, rank, managed), total(1, -1, managed);
    bool ok = chorusCommShrink(comm, last, 1, 0, &rest) == chorusSuccess &&
              chorusAllReduce(v.data(), total.data(), 1, chorusInt32, chorusSum, rest, nullptr) ==
                  chorusSuccess;
    settle(managed);
    if (!ok || total[0] != (n - 1) * (n - 2) / 2) {
      std::printf("rank %d: shrink: sum %d, want %d (%s)\n", rank, total[0], (n - 1) * (n - 2) / 2,
                  chorusGetLastError(nullptr));
      bad = 1;
    }
    if (rest != nullptr) chorusCommDestroy(rest);
  }
  if (chorusCommDestroy(comm) != chorusSuccess) bad = 1;
  if (bad == 0) std::printf("rank %d of %d: ok\n", rank, n);
  return bad;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: uniqueid_probe N THREADS\n");
    return 2;
  }
  const int n = std::atoi(argv[1]), threads = std::atoi(argv[2]);
  if (const char* text = std::getenv("PROBE_UNIQUE_ID")) {  // a child: argv[2] is its rank
    chorusUniqueId id{};
    std::strncpy(id.internal, text, sizeof id.internal - 1);
    return runRank(id, n, threads);
  }
  if (n < 1 || threads < 1 || threads > n) return 2;
  chorusUniqueId id;
  if (chorusGetUniqueId(&id) != chorusSuccess) {
    std::printf("chorusGetUniqueId failed: %s\n", chorusGetLastError(nullptr));
    return 1;
  }
  std::string idVar = std::string("PROBE_UNIQUE_ID=") + id.internal;
  std::vector<char*> env;
  for (char** e = environ; *e != nullptr; ++e) env.push_back(*e);
  env.push_back(idVar.data());
  env.push_back(nullptr);
  std::vector<pid_t> kids;
  for (int r = threads; r < n; ++r) {
    std::string rank = std::to_string(r);
    char* args[] = {argv[0], argv[1], rank.data(), nullptr};
    pid_t pid = -1;
    if (posix_spawn(&pid, argv[0], nullptr, nullptr, args, env.data()) != 0) return 1;
    kids.push_back(pid);
  }
  std::vector<int> bad(static_cast<size_t>(threads));
  std::vector<std::thread> ts;
  for (int r = 0; r < threads; ++r)
    ts.emplace_back([&, r] { bad[static_cast<size_t>(r)] = runRank(id, n, r); });
  for (auto& t : ts) t.join();
  int failed = 0;
  for (int b : bad) failed += b;
  const char* end = std::getenv("PROBE_END");
  const bool kill = end != nullptr && std::strcmp(end, "kill") == 0;
  for (size_t k = 0; k < kids.size(); ++k) {
    int status = 0;
    ::waitpid(kids[k], &status, 0);
    const bool last = static_cast<int>(k) + threads == n - 1;
    if (kill && last ? !(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
                     : (!WIFEXITED(status) || WEXITSTATUS(status) != 0))
      ++failed;
  }
  std::printf("%d of %d ranks failed\n", failed, n);
  return failed == 0 ? 0 : 1;
}
