#include <cuda_runtime.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "core/failpoint.h"
#include "cuda/staged.h"

namespace chorus::cuda {
namespace {

Status cudaFailure(cudaError_t e, const char* what) {
  return Status(StatusCode::kUnsupported, std::string(what) + ": " + cudaGetErrorName(e) + " (" +
                                              cudaGetErrorString(e) + ")");
}

#define CHORUS_STAGED_TRY(expr)                                         \
  do {                                                                  \
    cudaError_t chorus_e_ = (expr);                                     \
    if (chorus_e_ != cudaSuccess) return cudaFailure(chorus_e_, #expr); \
  } while (0)

bool onDevice(const void* p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

// A call's two words in mapped pinned memory: [0] how many times it was
// made ready, [1] how many times it was done. The stream waits while done <
// ready.
__global__ void waitDone(const uint32_t* words) {
  const volatile uint32_t* w = words;
  while (w[1] < w[0]) __nanosleep(1000);
}

constexpr uint32_t kLetThrough = 0xffffffffu;  // "done" for a call that will not run
constexpr size_t kWordsPerSlab = 1024;         // 512 calls' words per allocation

struct Pinned {
  void* p;
  size_t bytes;
};

// `to`'s later work waits for what `from` has enqueued so far.
cudaError_t follow(cudaStream_t to, cudaStream_t from) {
  cudaEvent_t e;
  cudaError_t r = cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
  if (r != cudaSuccess) return r;
  r = cudaEventRecord(e, from);
  if (r == cudaSuccess) r = cudaStreamWaitEvent(to, e, 0);
  cudaEventDestroy(e);
  return r;
}

// Pinned allocations are not stream work: allowed while this thread's
// stream captures (CUDA's global mode would refuse them and end the
// capture).
cudaError_t pinnedAlloc(void** p, size_t bytes, unsigned flags) {
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&mode);
  cudaError_t e = cudaHostAlloc(p, bytes, flags);
  cudaThreadExchangeStreamCaptureMode(&mode);
  return e;
}

struct Job {
  StagedRank::State* st = nullptr;
  std::vector<void*> host;     // per region: where the run sees it
  std::vector<Pinned> pinned;  // pinned buffers it holds
  std::function<Status(const std::vector<void*>&)> run;
  std::function<Status()> work;  // runInOrder's, instead of `run`
  uint32_t* words = nullptr;     // host address of its two words
  bool captured = false;
  bool counted = false;   // an eager call counted in State::unrun
  bool finished = false;  // runInOrder's work has run
  Status result;          // runInOrder's
};

}  // namespace

struct StagedRank::State {
  int timeoutMs = 0;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Job*> queue;                     // to run, in the order streams reach them
  std::map<Job*, std::shared_ptr<Job>> live;  // until the stream passes them; captured: for good
  std::vector<Job*> ended;                    // passed their stream: the worker frees them
  std::vector<Pinned> pool;                   // pinned buffers free for later calls
  std::vector<uint32_t*> freeWords;
  std::vector<void*> slabs;
  Status error;
  bool stopping = false;
  int outstanding = 0;  // eager calls not yet past their stream
  int unrun = 0;        // eager calls enqueued and not yet run (runInOrder waits for them)

  ~State() {  // on a user thread or the worker, never in a host function
    for (const Pinned& b : pool) cudaFreeHost(b.p);
    for (auto& [raw, job] : live)
      for (const Pinned& b : job->pinned) cudaFreeHost(b.p);
    for (void* s : slabs) cudaFreeHost(s);
  }

  // Returns a finished call's buffers (mu held). Nothing is freed here:
  // cudaFreeHost may wait for the device, where waitDone kernels wait for
  // this very worker; the pool is freed with the state.
  void recycle(Job& job) {
    for (const Pinned& b : job.pinned) pool.push_back(b);
    job.pinned.clear();
    if (job.words != nullptr) freeWords.push_back(job.words);
    job.words = nullptr;
  }

  void worker();
  // A call's two words (from a slab of mapped pinned memory), set for an
  // eager or a captured call. Made without the lock, which host functions
  // take.
  Status takeWords(Job& job);
  // Where the run sees each region: device memory staged through a pinned
  // buffer (from the pool, or new), host memory in place. On a failure the
  // job's words and buffers go back (nothing was enqueued yet).
  Status stage(Job& job, const std::vector<StagedRegion>& regions);
};

Status StagedRank::State::takeWords(Job& job) {
  bool needSlab;
  {
    std::lock_guard<std::mutex> lock(mu);
    needSlab = freeWords.empty();
  }
  if (needSlab) {
    void* slab = nullptr;
    if (cudaError_t e = pinnedAlloc(&slab, kWordsPerSlab * sizeof(uint32_t),
                                    cudaHostAllocMapped | cudaHostAllocPortable);
        e != cudaSuccess)
      return cudaFailure(e, "cudaHostAlloc (call words)");
    std::lock_guard<std::mutex> lock(mu);
    slabs.push_back(slab);
    for (size_t k = 0; k < kWordsPerSlab; k += 2)
      freeWords.push_back(static_cast<uint32_t*>(slab) + k);
  }
  std::lock_guard<std::mutex> lock(mu);
  job.words = freeWords.back();
  freeWords.pop_back();
  job.words[0] = job.captured ? 0 : 1;
  job.words[1] = 0;
  return Status::ok();
}

Status StagedRank::State::stage(Job& job, const std::vector<StagedRegion>& regions) {
  for (const StagedRegion& r : regions) {
    if (r.data == nullptr || r.bytes == 0 || !onDevice(r.data)) {
      job.host.push_back(r.data);  // host memory, or nothing: used in place
      continue;
    }
    // Powers of two, so that later calls reuse buffers; a pooled buffer at
    // most twice the size needed.
    size_t bytes = 4096;
    while (bytes < r.bytes) bytes *= 2;
    void* p = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu);
      for (auto it = pool.begin(); it != pool.end(); ++it)
        if (it->bytes >= bytes && it->bytes <= 2 * bytes) {
          p = it->p;
          bytes = it->bytes;
          pool.erase(it);
          break;
        }
    }
    if (p == nullptr) {
      cudaError_t e = pinnedAlloc(&p, bytes, cudaHostAllocPortable);
      if (e != cudaSuccess) {
        std::lock_guard<std::mutex> lock(mu);
        recycle(job);
        return cudaFailure(e, "cudaHostAlloc (staging buffer)");
      }
    }
    job.pinned.push_back({p, bytes});
    job.host.push_back(p);
  }
  return Status::ok();
}

namespace {

// Host functions: no CUDA calls, no waiting. A call is queued when its
// stream reaches it (eager calls and each replay of a captured one alike),
// so the worker never waits on a call that stands behind another one in a
// stream. Calls of one communicator on different streams must be ordered by
// the caller (one stream, or events), as their order across processes must
// agree.
void CUDART_CB readyFn(void* p) {
  auto* job = static_cast<Job*>(p);
  StagedRank::State* st = job->st;
  std::lock_guard<std::mutex> lock(st->mu);
  if (job->captured) __atomic_store_n(&job->words[0], job->words[0] + 1, __ATOMIC_RELEASE);
  if (st->stopping) {  // the communicator is gone: let the stream pass
    __atomic_store_n(&job->words[1], kLetThrough, __ATOMIC_RELEASE);
    if (job->counted) --st->unrun;
  } else {
    st->queue.push_back(job);
  }
  st->cv.notify_all();
}

void CUDART_CB endFn(void* p) {
  auto* job = static_cast<Job*>(p);
  StagedRank::State* st = job->st;
  std::lock_guard<std::mutex> lock(st->mu);
  st->ended.push_back(job);
  --st->outstanding;
  st->cv.notify_all();
}

}  // namespace

void StagedRank::State::worker() {
  std::unique_lock<std::mutex> lock(mu);
  for (;;) {
    // Jobs hold the last references to process worlds whose destructors
    // talk to peers: destroyed without the lock.
    std::vector<std::shared_ptr<Job>> done;
    for (Job* j : ended) {
      recycle(*j);
      auto it = live.find(j);
      done.push_back(std::move(it->second));
      live.erase(it);
    }
    ended.clear();
    if (!done.empty()) {
      lock.unlock();
      done.clear();
      lock.lock();
      continue;
    }
    Job* j = queue.empty() ? nullptr : queue.front();
    if (j != nullptr) {
      queue.pop_front();
      // After a failure the communicator is broken (as an NCCL one with an
      // async error): later calls are let through without running.
      const bool skip = stopping || !error.isOk();
      lock.unlock();
      // (Statuses built in place: nvcc refuses a discarded Status& from =.)
      const Status s =
          skip ? (j->work ? Status(StatusCode::kAborted, "the communicator ended or failed earlier")
                          : Status::ok())
               : (j->work ? j->work() : j->run(j->host));
      lock.lock();
      if (!s.isOk() && error.isOk()) {
        Status copy = s;
        std::swap(error, copy);
      }
      if (j->work) {
        Status copy = s;
        std::swap(j->result, copy);
        j->finished = true;
      } else {
        if (j->counted) --unrun;
        // (A word let through stays so: +1 would wrap it below "ready".)
        if (j->words[1] != kLetThrough)
          __atomic_store_n(&j->words[1], j->captured ? j->words[1] + 1 : 1u, __ATOMIC_RELEASE);
      }
      cv.notify_all();
      continue;
    }
    if (stopping && outstanding == 0 && queue.empty()) return;
    cv.wait(lock);
  }
}

StagedRank::StagedRank(int device, int timeoutMs)
    : device_(device), state_(std::make_shared<State>()) {
  state_->timeoutMs = timeoutMs;
  std::shared_ptr<State> st = state_;
  std::thread([st] { st->worker(); }).detach();  // holds the state until it ends
}

StagedRank::~StagedRank() {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->stopping = true;
  // Calls queued and not run: their streams pass without waiting for them.
  for (Job* j : state_->queue) {
    if (j->work) {
      Status why(StatusCode::kAborted, "the communicator was destroyed");
      std::swap(j->result, why);
      j->finished = true;
    } else {
      if (j->counted) --state_->unrun;
      __atomic_store_n(&j->words[1], kLetThrough, __ATOMIC_RELEASE);
    }
  }
  state_->queue.clear();
  state_->cv.notify_all();
}

Status StagedRank::asyncError() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->error;
}

Status StagedRank::synchronize() {
  std::unique_lock<std::mutex> lock(state_->mu);
  bool done = state_->cv.wait_for(lock, std::chrono::milliseconds(state_->timeoutMs),
                                  [&] { return state_->outstanding == 0; });
  if (!done)
    return Status(StatusCode::kTimeout, std::to_string(state_->outstanding) +
                                            " staged GPU calls did not pass their streams within " +
                                            std::to_string(state_->timeoutMs / 1000) + " s");
  return state_->error;
}

Status StagedRank::runInOrder(std::function<Status()> work) {
  auto job = std::make_shared<Job>();
  job->st = state_.get();
  job->work = std::move(work);
  State& st = *state_;
  std::unique_lock<std::mutex> lock(st.mu);
  if (st.stopping) return Status(StatusCode::kAborted, "the communicator was destroyed");
  // After every call enqueued before it has run: their streams must reach
  // them first (so that peers see the same order).
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(st.timeoutMs);
  if (!st.cv.wait_until(lock, deadline, [&] { return st.unrun == 0 || st.stopping; }))
    return Status(StatusCode::kTimeout,
                  std::to_string(st.unrun) +
                      " staged GPU calls enqueued before it did not run within " +
                      std::to_string(st.timeoutMs / 1000) + " s (are their streams stuck?)");
  if (st.stopping) return Status(StatusCode::kAborted, "the communicator was destroyed");
  st.queue.push_back(job.get());
  st.cv.notify_all();
  // The work itself has the process world's timeouts; once queued it runs
  // (or is let through by the destructor), so this wait ends.
  st.cv.wait(lock, [&] { return job->finished; });
  return job->result;
}

Status StagedRank::enqueue(const std::vector<void*>& streams, std::vector<StagedRegion> regions,
                           std::function<Status(const std::vector<void*>&)> run) {
  if (Status e = asyncError(); !e.isOk()) return e;
  int saved = 0;
  CHORUS_STAGED_TRY(cudaGetDevice(&saved));
  struct Restore {
    int d;
    ~Restore() { cudaSetDevice(d); }
  } restore{saved};
  CHORUS_STAGED_TRY(cudaSetDevice(device_));
  auto primary = static_cast<cudaStream_t>(streams.empty() ? nullptr : streams[0]);
  // Every stream of the call reaches it before the staging starts.
  for (size_t i = 1; i < streams.size(); ++i)
    if (cudaError_t r = follow(primary, static_cast<cudaStream_t>(streams[i])); r != cudaSuccess)
      return cudaFailure(r, "joining the call's streams");
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  CHORUS_STAGED_TRY(cudaStreamIsCapturing(primary, &capture));

  auto job = std::make_shared<Job>();
  job->st = state_.get();
  job->run = std::move(run);
  job->captured = capture != cudaStreamCaptureStatusNone;
  State& st = *state_;
  CHORUS_RETURN_IF_ERROR(st.takeWords(*job));
  uint32_t* deviceWords = nullptr;
  if (cudaError_t e =
          cudaHostGetDevicePointer(reinterpret_cast<void**>(&deviceWords), job->words, 0);
      e != cudaSuccess) {
    std::lock_guard<std::mutex> lock(st.mu);
    st.recycle(*job);
    return cudaFailure(e, "cudaHostGetDevicePointer");
  }
  CHORUS_RETURN_IF_ERROR(st.stage(*job, regions));
  // From the first operation enqueued on, the stream may read the job: on a
  // failure it is kept for good (and the communicator marked broken).
  {
    std::lock_guard<std::mutex> lock(st.mu);
    st.live[job.get()] = job;
  }
  // An eager call is counted before its stream can reach it: once the
  // ready function is enqueued the worker may run the call and count it
  // down at any moment, before this thread goes on (counted after, a call
  // run first left `unrun` one too high for good, and every later split or
  // shrink timed out). `ends`: whether its end function was enqueued (it
  // counts `outstanding` down).
  bool ends = false;
  if (!job->captured) {
    std::lock_guard<std::mutex> lock(st.mu);
    ++st.outstanding;
    ++st.unrun;
    job->counted = true;
  }
  bool readied = false;  // the ready function was enqueued
  auto broken = [&](cudaError_t e, const char* what) {
    Status s = cudaFailure(e, what);
    std::lock_guard<std::mutex> lock(st.mu);
    // What the stream will never do for this call, undone here.
    if (job->counted && !readied) {
      --st.unrun;
      job->counted = false;
    }
    if (!job->captured && !ends) --st.outstanding;
    st.cv.notify_all();
    __atomic_store_n(&job->words[1], kLetThrough, __ATOMIC_RELEASE);
    if (st.error.isOk()) {
      Status copy = s;
      std::swap(st.error, copy);
    }
    return s;
  };
  for (size_t i = 0; i < regions.size(); ++i)
    if (regions[i].in && job->host[i] != regions[i].data)
      if (cudaError_t e = cudaMemcpyAsync(job->host[i], regions[i].data, regions[i].bytes,
                                          cudaMemcpyDeviceToHost, primary);
          e != cudaSuccess)
        return broken(e, "cudaMemcpyAsync (device to host)");
  if (cudaError_t e = cudaLaunchHostFunc(primary, readyFn, job.get()); e != cudaSuccess)
    return broken(e, "cudaLaunchHostFunc");
  readied = true;
  (void)failpoint("staged.ready");  // tests: the worker runs the call before we go on
  void* args[] = {&deviceWords};
  if (cudaError_t e = cudaLaunchKernel(reinterpret_cast<const void*>(waitDone), dim3(1), dim3(1),
                                       args, 0, primary);
      e != cudaSuccess)
    return broken(e, "cudaLaunchKernel (waiting for the host run)");
  for (size_t i = 0; i < regions.size(); ++i)
    if (regions[i].out && job->host[i] != regions[i].data)
      if (cudaError_t e = cudaMemcpyAsync(regions[i].data, job->host[i], regions[i].bytes,
                                          cudaMemcpyHostToDevice, primary);
          e != cudaSuccess)
        return broken(e, "cudaMemcpyAsync (host to device)");
  if (!job->captured) {
    if (cudaError_t e = cudaLaunchHostFunc(primary, endFn, job.get()); e != cudaSuccess)
      return broken(e, "cudaLaunchHostFunc");
    ends = true;
  }
  // The other streams' later work waits for the call.
  for (size_t i = 1; i < streams.size(); ++i)
    if (cudaError_t r = follow(static_cast<cudaStream_t>(streams[i]), primary); r != cudaSuccess)
      return broken(r, "joining the call's streams");
  return Status::ok();
}

}  // namespace chorus::cuda
