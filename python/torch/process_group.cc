// chorus._torch: a torch.distributed backend ("chorus") over Chorus's C API
// (docs/pytorch.md). CPU tensors; every call is queued to one worker thread
// per process group, which runs them in order through chorus.h and
// completes their Work (and its Future, for DDP). Point-to-point calls are
// held until something needs them (a wait, a collective, the end of a
// coalescing block) and then issued together as one Chorus group, so an
// isend / irecv exchange between ranks cannot deadlock on the order the
// ranks post them.
//
// The torch-version-specific part is this file's ProcessGroup subclass and
// its factory (torch 1.13: c10d::ProcessGroup, register_backend's
// (store, rank, size, timeout)); torch 2.x moves it to c10d::Backend with a
// `devices` argument to register_backend.
#include <chorus/chorus.h>
#include <pybind11/chrono.h>
#include <torch/python.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <vector>

namespace chorus::torch_backend {
namespace {

using at::Tensor;
using c10::intrusive_ptr;

[[noreturn]] void fail(const std::string& message) {
  throw std::runtime_error("chorus: " + message);
}

void check(chorusResult_t r, const char* what) {
  if (r != chorusSuccess) fail(std::string(what) + ": " + chorusGetLastError(nullptr));
}

chorusDataType_t dataType(const Tensor& t) {
  switch (t.scalar_type()) {
    case at::kChar:
      return chorusInt8;
    case at::kByte:
      return chorusUint8;
    case at::kInt:
      return chorusInt32;
    case at::kLong:
      return chorusInt64;
    case at::kHalf:
      return chorusFloat16;
    case at::kBFloat16:
      return chorusBfloat16;
    case at::kFloat:
      return chorusFloat32;
    case at::kDouble:
      return chorusFloat64;
    default:
      fail(std::string("no Chorus data type for ") + c10::toString(t.scalar_type()));
  }
}

chorusRedOp_t redOp(const c10d::ReduceOp& op) {
  switch (static_cast<c10d::ReduceOp::RedOpType>(op)) {
    case c10d::ReduceOp::SUM:
      return chorusSum;
    case c10d::ReduceOp::AVG:
      return chorusAvg;
    case c10d::ReduceOp::PRODUCT:
      return chorusProd;
    case c10d::ReduceOp::MIN:
      return chorusMin;
    case c10d::ReduceOp::MAX:
      return chorusMax;
    default:
      fail("reduction not supported (sum, avg, product, min, max)");
  }
}

// A tensor Chorus can read and write in place: on the CPU, dense, contiguous.
void checkTensor(const Tensor& t) {
  if (!t.device().is_cpu())
    fail("the chorus backend serves CPU tensors; " + t.device().str() +
         " tensors need Chorus's CUDA backend, which this build of the torch backend does not "
         "have yet (use NCCL, or libchorus-nccl: docs/nccl.md)");
  if (t.layout() != at::kStrided) fail("sparse tensors are not supported");
  if (!t.is_contiguous()) fail("tensors must be contiguous");
  (void)dataType(t);  // a type Chorus has, checked when the call is made
}

// chorusGroupStart ... End: the end runs even when a call in between threw,
// so the thread's group depth never stays raised (the calls queued so far
// then run; their peers' errors end them).
class Group {
 public:
  Group() { check(chorusGroupStart(), "chorusGroupStart"); }
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;
  ~Group() {
    if (open_) chorusGroupEnd();
  }
  void end(const char* what) {
    open_ = false;
    check(chorusGroupEnd(), what);
  }

 private:
  bool open_ = true;
};

const Tensor& single(const std::vector<Tensor>& ts) {
  if (ts.size() != 1) fail("one tensor per call (got " + std::to_string(ts.size()) + ")");
  checkTensor(ts[0]);
  return ts[0];
}

size_t count(const Tensor& t) { return static_cast<size_t>(t.numel()); }

class ProcessGroupChorus;

// What a Work knows of its group: the group while it lives (a Work may
// outlive it; then there is nothing to flush).
struct Link {
  std::mutex mutex;
  ProcessGroupChorus* pg = nullptr;
  void flush();
};

// One call's completion: torch's Work (wait, isCompleted, exception) and a
// Future with its output tensors (DDP's comm hooks).
class WorkChorus : public c10d::Work {
 public:
  WorkChorus(std::shared_ptr<Link> link, c10d::OpType type, std::vector<Tensor> outputs)
      : c10d::Work(-1, type),
        link_(std::move(link)),
        outputs_(std::move(outputs)),
        future_(c10::make_intrusive<at::ivalue::Future>(
            c10::ListType::create(c10::TensorType::get()))) {}

  bool isCompleted() override;
  bool wait(std::chrono::milliseconds timeout) override;
  std::vector<Tensor> result() override { return outputs_; }
  intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

  // The call ended: wait() and isCompleted() see it (the worker's thread).
  void done(std::exception_ptr e) { finish(e); }
  // Then its future, on the completer's thread: callbacks run there, so one
  // that waits for another call of this group does not stall the worker.
  void completeFuture() {
    std::exception_ptr e = exception();
    if (e)
      future_->setError(e);
    else
      future_->markCompleted(c10::IValue(outputs_));
  }

 private:
  std::shared_ptr<Link> link_;
  std::vector<Tensor> outputs_;
  intrusive_ptr<c10::ivalue::Future> future_;
};

// The groups alive in this process: shutdownAll() stops their threads at
// interpreter exit (an atexit hook of chorus.torch). A thread of theirs that
// dropped the last reference to a Python-owned tensor after the interpreter
// began finalizing would take the GIL, and Python ends such a thread with a
// forced unwind that aborts the process ("terminate called without an
// active exception").
struct Live {
  std::mutex mutex;
  std::set<ProcessGroupChorus*> groups;
};
Live& live() {
  static Live* l = new Live;  // never destroyed: groups may outlive statics
  return *l;
}

class ProcessGroupChorus : public c10d::ProcessGroup {
 public:
  ProcessGroupChorus(const intrusive_ptr<c10d::Store>& store, int rank, int size,
                     std::chrono::milliseconds timeout)
      : c10d::ProcessGroup(rank, size) {
    // Chorus's deadline for a stalled call or peer: the group's timeout,
    // unless CHORUS_TIMEOUT_S says otherwise.
    if (std::getenv("CHORUS_TIMEOUT_S") == nullptr && timeout.count() > 0) {
      std::string s = std::to_string(std::max<int64_t>(1, timeout.count() / 1000));
      setenv("CHORUS_TIMEOUT_S", s.c_str(), 0);
    }
    // Rank 0 starts the root that ranks meet at; its id travels through
    // torch's store (the one torchrun / init_process_group made).
    const std::string key = "chorus/unique_id";
    chorusUniqueId id{};
    if (rank == 0) {
      check(chorusGetUniqueId(&id), "chorusGetUniqueId");
      store->set(key, std::vector<uint8_t>(id.internal, id.internal + sizeof id.internal));
    } else {
      std::vector<uint8_t> bytes = store->get(key);
      if (bytes.size() != sizeof id.internal) fail("the store holds a malformed unique id");
      std::memcpy(id.internal, bytes.data(), bytes.size());
    }
    check(chorusCommInitRank(&comm_, size, id, rank), "chorusCommInitRank");
    link_->pg = this;
    completer_ = std::thread([this] { completeLoop(); });
    worker_ = std::thread([this] { loop(); });
    std::lock_guard<std::mutex> lock(live().mutex);
    live().groups.insert(this);
  }

  ~ProcessGroupChorus() override {
    {
      std::lock_guard<std::mutex> lock(live().mutex);
      live().groups.erase(this);
    }
    // The worker may need the GIL (a job dropping the last reference to a
    // Python-owned tensor): never hold it while waiting for the worker.
    if (Py_IsInitialized() && PyGILState_Check()) {
      pybind11::gil_scoped_release nogil;
      shutdown();
    } else {
      shutdown();
    }
  }

  const std::string getBackendName() const override { return "chorus"; }

  // Runs what is queued, stops the worker, frees the communicator; once
  // (the atexit hook, then the destructor). Calls made after it fail.
  void shutdown() {
    std::lock_guard<std::mutex> once(shutdownMutex_);
    if (comm_ == nullptr) return;
    {
      std::lock_guard<std::mutex> lock(link_->mutex);
      link_->pg = nullptr;
    }
    flush();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
    {
      std::lock_guard<std::mutex> lock(doneMutex_);
      doneStop_ = true;
    }
    doneCv_.notify_all();
    completer_.join();
    chorusCommDestroy(comm_);
    comm_ = nullptr;
  }

  static void shutdownAll() {
    std::lock_guard<std::mutex> lock(live().mutex);
    for (ProcessGroupChorus* pg : live().groups) pg->shutdown();
  }

  // Issues the point-to-point calls held so far as one group.
  void flush() {
    std::vector<Pending> batch;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      batch.swap(p2p_);
    }
    if (batch.empty()) return;
    std::vector<intrusive_ptr<WorkChorus>> works;
    for (Pending& p : batch) works.push_back(p.work);
    enqueue(
        [this, batch = std::move(batch)] {
          Group group;
          for (const Pending& p : batch) {
            if (p.send)
              check(chorusSend(p.tensor.data_ptr(), count(p.tensor), dataType(p.tensor), p.peer,
                               comm_, nullptr),
                    "send");
            else
              check(chorusRecv(p.tensor.data_ptr(), count(p.tensor), dataType(p.tensor), p.peer,
                               comm_, nullptr),
                    "recv");
          }
          group.end("point-to-point group");
        },
        std::move(works));
  }

  void startCoalescing() override { coalescing_ = true; }
  void endCoalescing(std::vector<intrusive_ptr<c10d::Work>>& /*reqs*/) override {
    coalescing_ = false;
    flush();
  }

  intrusive_ptr<c10d::Work> broadcast(std::vector<Tensor>& tensors,
                                      const c10d::BroadcastOptions& opts) override {
    Tensor t = single(tensors);
    const int root = static_cast<int>(opts.rootRank);
    return run(c10d::OpType::BROADCAST, {t}, [this, t, root] {
      check(
          chorusBroadcast(t.data_ptr(), t.data_ptr(), count(t), dataType(t), root, comm_, nullptr),
          "broadcast");
    });
  }

  intrusive_ptr<c10d::Work> allreduce(std::vector<Tensor>& tensors,
                                      const c10d::AllreduceOptions& opts) override {
    Tensor t = single(tensors);
    const chorusRedOp_t op = redOp(opts.reduceOp);
    return run(c10d::OpType::ALLREDUCE, {t}, [this, t, op] {
      check(chorusAllReduce(t.data_ptr(), t.data_ptr(), count(t), dataType(t), op, comm_, nullptr),
            "allreduce");
    });
  }

  intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override {
    if (tensors.empty()) fail("allreduce_coalesced needs at least one tensor");
    for (const Tensor& t : tensors) {
      checkTensor(t);
      if (t.scalar_type() != tensors[0].scalar_type())
        fail("allreduce_coalesced: the tensors' dtypes differ");
    }
    const chorusRedOp_t op = redOp(opts.reduceOp);
    std::vector<Tensor> ts = tensors;
    return run(c10d::OpType::ALLREDUCE_COALESCED, ts, [this, ts, op] {
      Tensor flat = packed(ts);
      check(chorusAllReduce(flat.data_ptr(), flat.data_ptr(), count(flat), dataType(flat), op,
                            comm_, nullptr),
            "allreduce_coalesced");
      unflatten(flat, ts);
    });
  }

  intrusive_ptr<c10d::Work> reduce(std::vector<Tensor>& tensors,
                                   const c10d::ReduceOptions& opts) override {
    Tensor t = single(tensors);
    const chorusRedOp_t op = redOp(opts.reduceOp);
    const int root = static_cast<int>(opts.rootRank);
    return run(c10d::OpType::REDUCE, {t}, [this, t, op, root] {
      check(
          chorusReduce(t.data_ptr(), t.data_ptr(), count(t), dataType(t), op, root, comm_, nullptr),
          "reduce");
    });
  }

  intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<Tensor>>& outputs,
                                      std::vector<Tensor>& inputs,
                                      const c10d::AllgatherOptions&) override {
    Tensor in = single(inputs);
    if (outputs.size() != 1 || static_cast<int>(outputs[0].size()) != size_)
      fail("allgather needs one output list of " + std::to_string(size_) + " tensors");
    std::vector<Tensor> outs = outputs[0];
    for (const Tensor& o : outs) sameShape(o, in, "allgather");
    return run(c10d::OpType::ALLGATHER, outs, [this, in, outs] {
      Tensor flat = adjacent(outs);
      const bool direct = flat.defined();
      if (!direct) flat = scratch(static_cast<int64_t>(size_) * in.numel(), in);
      check(
          chorusAllGather(in.data_ptr(), flat.data_ptr(), count(in), dataType(in), comm_, nullptr),
          "allgather");
      if (!direct) unflatten(flat, outs);
    });
  }

  intrusive_ptr<c10d::Work> _allgather_base(Tensor& output, Tensor& input,
                                            const c10d::AllgatherOptions&) override {
    checkTensor(output);
    checkTensor(input);
    if (output.numel() != input.numel() * size_ || output.scalar_type() != input.scalar_type())
      fail("_allgather_base: the output must hold world size x the input's elements");
    Tensor in = input, out = output;
    return run(c10d::OpType::_ALLGATHER_BASE, {out}, [this, in, out] {
      check(chorusAllGather(in.data_ptr(), out.data_ptr(), count(in), dataType(in), comm_, nullptr),
            "allgather");
    });
  }

  intrusive_ptr<c10d::Work> reduce_scatter(std::vector<Tensor>& outputs,
                                           std::vector<std::vector<Tensor>>& inputs,
                                           const c10d::ReduceScatterOptions& opts) override {
    Tensor out = single(outputs);
    if (inputs.size() != 1 || static_cast<int>(inputs[0].size()) != size_)
      fail("reduce_scatter needs one input list of " + std::to_string(size_) + " tensors");
    std::vector<Tensor> ins = inputs[0];
    for (const Tensor& i : ins) sameShape(i, out, "reduce_scatter");
    const chorusRedOp_t op = redOp(opts.reduceOp);
    return run(c10d::OpType::REDUCE_SCATTER, {out}, [this, out, ins, op] {
      Tensor flat = packed(ins);
      check(chorusReduceScatter(flat.data_ptr(), out.data_ptr(), count(out), dataType(out), op,
                                comm_, nullptr),
            "reduce_scatter");
    });
  }

  intrusive_ptr<c10d::Work> _reduce_scatter_base(Tensor& output, Tensor& input,
                                                 const c10d::ReduceScatterOptions& opts) override {
    checkTensor(output);
    checkTensor(input);
    if (input.numel() != output.numel() * size_ || output.scalar_type() != input.scalar_type())
      fail("_reduce_scatter_base: the input must hold world size x the output's elements");
    const chorusRedOp_t op = redOp(opts.reduceOp);
    Tensor in = input, out = output;
    return run(c10d::OpType::_REDUCE_SCATTER_BASE, {out}, [this, in, out, op] {
      check(chorusReduceScatter(in.data_ptr(), out.data_ptr(), count(out), dataType(out), op, comm_,
                                nullptr),
            "reduce_scatter");
    });
  }

  intrusive_ptr<c10d::Work> alltoall_base(Tensor& output, Tensor& input,
                                          std::vector<int64_t>& outSplits,
                                          std::vector<int64_t>& inSplits,
                                          const c10d::AllToAllOptions&) override {
    checkTensor(output);
    checkTensor(input);
    if (output.scalar_type() != input.scalar_type()) fail("alltoall: the dtypes differ");
    Tensor in = input, out = output;
    if (outSplits.empty() && inSplits.empty()) {
      if (in.numel() != out.numel() || in.numel() % size_ != 0)
        fail(
            "alltoall_single: input and output must hold the same multiple of world size "
            "elements (or pass split sizes)");
      return run(c10d::OpType::ALLTOALL_BASE, {out}, [this, in, out] {
        check(chorusAllToAll(in.data_ptr(), out.data_ptr(), count(in) / size_, dataType(in), comm_,
                             nullptr),
              "alltoall");
      });
    }
    // Uneven: one send and one receive per peer, in one group.
    std::vector<Tensor> sends = splitRows(in, inSplits, "input_split_sizes");
    std::vector<Tensor> recvs = splitRows(out, outSplits, "output_split_sizes");
    return run(c10d::OpType::ALLTOALL_BASE, {out},
               [this, sends, recvs] { exchange(sends, recvs, "alltoall_single"); });
  }

  intrusive_ptr<c10d::Work> alltoall(std::vector<Tensor>& outputs, std::vector<Tensor>& inputs,
                                     const c10d::AllToAllOptions&) override {
    if (static_cast<int>(outputs.size()) != size_ || static_cast<int>(inputs.size()) != size_)
      fail("alltoall needs " + std::to_string(size_) + " input and output tensors");
    for (const Tensor& t : outputs) checkTensor(t);
    for (const Tensor& t : inputs) checkTensor(t);
    std::vector<Tensor> sends = inputs, recvs = outputs;
    return run(c10d::OpType::ALLTOALL, recvs,
               [this, sends, recvs] { exchange(sends, recvs, "alltoall"); });
  }

  intrusive_ptr<c10d::Work> gather(std::vector<std::vector<Tensor>>& outputs,
                                   std::vector<Tensor>& inputs,
                                   const c10d::GatherOptions& opts) override {
    Tensor in = single(inputs);
    const int root = static_cast<int>(opts.rootRank);
    std::vector<Tensor> outs;
    if (rank_ == root) {
      if (outputs.size() != 1 || static_cast<int>(outputs[0].size()) != size_)
        fail("gather: the root needs one output list of " + std::to_string(size_) + " tensors");
      outs = outputs[0];
      for (const Tensor& o : outs) sameShape(o, in, "gather");
    } else if (!outputs.empty() && !outputs[0].empty()) {
      fail("gather: only the root passes output tensors");
    }
    return run(c10d::OpType::GATHER, outs, [this, in, outs, root] {
      Tensor flat;
      bool direct = false;
      if (rank_ == root) {
        flat = adjacent(outs);
        direct = flat.defined();
        if (!direct) flat = scratch(static_cast<int64_t>(size_) * in.numel(), in);
      }
      check(chorusGather(in.data_ptr(), rank_ == root ? flat.data_ptr() : nullptr, count(in),
                         dataType(in), root, comm_, nullptr),
            "gather");
      if (rank_ == root && !direct) unflatten(flat, outs);
    });
  }

  intrusive_ptr<c10d::Work> scatter(std::vector<Tensor>& outputs,
                                    std::vector<std::vector<Tensor>>& inputs,
                                    const c10d::ScatterOptions& opts) override {
    Tensor out = single(outputs);
    const int root = static_cast<int>(opts.rootRank);
    std::vector<Tensor> ins;
    if (rank_ == root) {
      if (inputs.size() != 1 || static_cast<int>(inputs[0].size()) != size_)
        fail("scatter: the root needs one input list of " + std::to_string(size_) + " tensors");
      ins = inputs[0];
      for (const Tensor& i : ins) sameShape(i, out, "scatter");
    } else if (!inputs.empty() && !inputs[0].empty()) {
      fail("scatter: only the root passes input tensors");
    }
    return run(c10d::OpType::SCATTER, {out}, [this, ins, out, root] {
      Tensor flat;
      if (rank_ == root) flat = packed(ins);
      check(chorusScatter(rank_ == root ? flat.data_ptr() : nullptr, out.data_ptr(), count(out),
                          dataType(out), root, comm_, nullptr),
            "scatter");
    });
  }

  intrusive_ptr<c10d::Work> send(std::vector<Tensor>& tensors, int dst, int /*tag*/) override {
    return hold(single(tensors), dst, true);
  }

  intrusive_ptr<c10d::Work> recv(std::vector<Tensor>& tensors, int src, int /*tag*/) override {
    return hold(single(tensors), src, false);
  }

  intrusive_ptr<c10d::Work> recvAnysource(std::vector<Tensor>&, int) override {
    fail("recv from any source is not supported (name the source rank)");
  }

  intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions&) override {
    Tensor t = at::zeros({1}, at::kInt);
    return run(c10d::OpType::BARRIER, {}, [this, t] {
      check(chorusAllReduce(t.data_ptr(), t.data_ptr(), 1, chorusInt32, chorusSum, comm_, nullptr),
            "barrier");
    });
  }

 private:
  struct Job {
    std::function<void()> body;
    std::vector<intrusive_ptr<WorkChorus>> works;
  };
  struct Pending {
    Tensor tensor;
    int peer = -1;
    bool send = false;
    intrusive_ptr<WorkChorus> work;
  };

  // The tensors as one flat tensor without a copy when they lie back to back
  // in one buffer with one dtype (e.g. list(t.chunk(n))); else undefined.
  static Tensor adjacent(const std::vector<Tensor>& ts) {
    if (ts.empty()) return Tensor();
    const char* next = static_cast<const char*>(ts[0].data_ptr());
    int64_t total = 0;
    for (const Tensor& t : ts) {
      if (t.scalar_type() != ts[0].scalar_type() || t.data_ptr() != next) return Tensor();
      next += t.numel() * t.element_size();
      total += t.numel();
    }
    return at::from_blob(ts[0].data_ptr(), {total}, ts[0].options());
  }
  // A flat buffer of `numel` elements of `like`'s dtype, reused across calls
  // (only the worker uses it): no allocation and page faults per call.
  Tensor scratch(int64_t numel, const Tensor& like) {
    const int64_t bytes = numel * like.element_size();
    if (!scratch_.defined() || scratch_.numel() < bytes)
      scratch_ = at::empty({bytes}, at::TensorOptions().dtype(at::kByte));
    return at::from_blob(scratch_.data_ptr(), {numel}, like.options());
  }
  // The tensors' contents as one flat tensor: a view when adjacent, else
  // copied into scratch.
  Tensor packed(const std::vector<Tensor>& ts) {
    Tensor flat = adjacent(ts);
    if (flat.defined()) return flat;
    int64_t total = 0;
    for (const Tensor& t : ts) total += t.numel();
    flat = scratch(total, ts[0]);
    int64_t at = 0;
    for (const Tensor& t : ts) {
      flat.narrow(0, at, t.numel()).copy_(t.reshape({-1}));
      at += t.numel();
    }
    return flat;
  }
  static void unflatten(const Tensor& flat, const std::vector<Tensor>& ts) {
    if (adjacent(ts).defined() && ts[0].data_ptr() == flat.data_ptr()) return;
    int64_t at = 0;
    for (const Tensor& t : ts) {
      t.copy_(flat.narrow(0, at, t.numel()).view(t.sizes()));
      at += t.numel();
    }
  }
  static void sameShape(const Tensor& a, const Tensor& b, const char* what) {
    checkTensor(a);
    if (a.numel() != b.numel() || a.scalar_type() != b.scalar_type())
      fail(std::string(what) + ": every tensor must have the input's size and dtype");
  }
  // Row blocks of `t` (dim 0) by `splits`, or equal blocks when empty.
  std::vector<Tensor> splitRows(const Tensor& t, const std::vector<int64_t>& splits,
                                const char* what) const {
    std::vector<Tensor> parts;
    const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
    if (splits.empty()) {
      if (rows % size_ != 0) fail(std::string(what) + ": rows do not split evenly");
      for (int r = 0; r < size_; ++r)
        parts.push_back(t.narrow(0, r * (rows / size_), rows / size_));
      return parts;
    }
    if (static_cast<int>(splits.size()) != size_)
      fail(std::string(what) + " must have world size entries");
    int64_t at = 0;
    for (int64_t s : splits) {
      if (s < 0 || at + s > rows) fail(std::string(what) + " exceed the tensor's rows");
      parts.push_back(t.narrow(0, at, s));
      at += s;
    }
    if (at != rows) fail(std::string(what) + " do not add up to the tensor's rows");
    return parts;
  }
  // sends[p] to rank p, recvs[p] from rank p, as one group; this rank's own
  // block is a copy.
  void exchange(const std::vector<Tensor>& sends, const std::vector<Tensor>& recvs,
                const char* what) {
    recvs[rank_].copy_(sends[rank_]);
    Group group;
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      if (sends[p].numel() > 0)
        check(
            chorusSend(sends[p].data_ptr(), count(sends[p]), dataType(sends[p]), p, comm_, nullptr),
            what);
      if (recvs[p].numel() > 0)
        check(
            chorusRecv(recvs[p].data_ptr(), count(recvs[p]), dataType(recvs[p]), p, comm_, nullptr),
            what);
    }
    group.end(what);
  }

  intrusive_ptr<c10d::Work> hold(const Tensor& t, int peer, bool isSend) {
    if (peer < 0 || peer >= size_ || peer == rank_)
      fail("peer " + std::to_string(peer) + " is not another rank of " + std::to_string(size_));
    auto work = c10::make_intrusive<WorkChorus>(
        link_, isSend ? c10d::OpType::SEND : c10d::OpType::RECV, std::vector<Tensor>{t});
    std::lock_guard<std::mutex> lock(mutex_);
    if (stop_) fail("the process group was shut down (the interpreter is exiting)");
    p2p_.push_back(Pending{t, peer, isSend, work});
    return work;
  }

  intrusive_ptr<c10d::Work> run(c10d::OpType type, std::vector<Tensor> outputs,
                                std::function<void()> body) {
    if (!coalescing_) flush();  // held point-to-point calls come first, in order
    auto work = c10::make_intrusive<WorkChorus>(link_, type, std::move(outputs));
    enqueue(std::move(body), {work});
    return work;
  }

  void enqueue(std::function<void()> body, std::vector<intrusive_ptr<WorkChorus>> works) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stop_) fail("the process group was shut down (the interpreter is exiting)");
      jobs_.push_back(Job{std::move(body), std::move(works)});
    }
    cv_.notify_all();
  }

  void loop() {
    for (;;) {
      Job job;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
        if (jobs_.empty()) return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      std::exception_ptr error;
      try {
        job.body();
      } catch (...) {
        error = std::current_exception();
      }
      for (auto& w : job.works) w->done(error);
      {
        std::lock_guard<std::mutex> lock(doneMutex_);
        for (auto& w : job.works) done_.push_back(std::move(w));
      }
      doneCv_.notify_all();
    }
  }

  void completeLoop() {
    for (;;) {
      intrusive_ptr<WorkChorus> w;
      {
        std::unique_lock<std::mutex> lock(doneMutex_);
        doneCv_.wait(lock, [this] { return doneStop_ || !done_.empty(); });
        if (done_.empty()) return;
        w = std::move(done_.front());
        done_.pop_front();
      }
      w->completeFuture();
    }
  }

  chorusComm_t comm_ = nullptr;
  std::mutex shutdownMutex_;
  Tensor scratch_;  // the worker's (scratch())
  std::shared_ptr<Link> link_ = std::make_shared<Link>();
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;
  std::vector<Pending> p2p_;
  bool stop_ = false;
  bool coalescing_ = false;
  std::thread worker_;
  // Calls whose futures are still to complete (completeLoop).
  std::mutex doneMutex_;
  std::condition_variable doneCv_;
  std::deque<intrusive_ptr<WorkChorus>> done_;
  bool doneStop_ = false;
  std::thread completer_;

  friend class WorkChorus;
};

void Link::flush() {
  std::lock_guard<std::mutex> lock(mutex);
  if (pg != nullptr) pg->flush();
}

bool WorkChorus::isCompleted() {
  link_->flush();
  return c10d::Work::isCompleted();
}

bool WorkChorus::wait(std::chrono::milliseconds timeout) {
  link_->flush();
  return c10d::Work::wait(timeout);
}

intrusive_ptr<c10d::ProcessGroup> create(const intrusive_ptr<c10d::Store>& store, int rank,
                                         int size, const std::chrono::duration<float>& timeout) {
  return c10::make_intrusive<ProcessGroupChorus>(
      store, rank, size, std::chrono::duration_cast<std::chrono::milliseconds>(timeout));
}

}  // namespace
}  // namespace chorus::torch_backend

PYBIND11_MODULE(_torch, m) {
  m.doc() = "The chorus backend of torch.distributed (import chorus.torch to register it).";
  // Joining blocks (the store, the other ranks): without the GIL.
  m.def("create_process_group", &chorus::torch_backend::create,
        pybind11::call_guard<pybind11::gil_scoped_release>(), pybind11::arg("store"),
        pybind11::arg("rank"), pybind11::arg("size"), pybind11::arg("timeout"),
        "A ProcessGroup over Chorus for `size` ranks meeting through `store` (rank 0 posts the "
        "Chorus id there).");
  m.def("shutdown_all", &chorus::torch_backend::ProcessGroupChorus::shutdownAll,
        pybind11::call_guard<pybind11::gil_scoped_release>(),
        "Runs what every chorus process group has queued and stops its threads (chorus.torch "
        "calls it at exit, before the interpreter finalizes).");
  m.def(
      "empty_shared",
      [](const std::vector<int64_t>& sizes, const at::Tensor& like) {
        int64_t numel = 1;
        for (int64_t d : sizes) {
          if (d < 0) throw std::invalid_argument("a negative size");
          numel *= d;
        }
        size_t bytes = std::max<size_t>(1, static_cast<size_t>(numel) * like.element_size());
        void* p = nullptr;
        chorusResult_t r = chorusMemAlloc(&p, bytes);
        if (r != chorusSuccess) throw std::runtime_error(chorusGetLastError(nullptr));
        return at::from_blob(
            p, sizes, [](void* q) { (void)chorusMemFree(q); },
            at::TensorOptions().dtype(like.scalar_type()).device(at::kCPU));
      },
      pybind11::arg("sizes"), pybind11::arg("like"),
      "A CPU tensor of `sizes` with `like`'s dtype in chorusMemAlloc memory (zeroed), which "
      "other processes of the job read in place: collectives on it move one copy per byte.");
  m.def(
      "check_tensor",
      [](const at::Tensor& t) {
        chorus::torch_backend::checkTensor(t);
        return static_cast<int>(chorus::torch_backend::dataType(t));
      },
      "The check every tensor passes before the backend uses it (device, layout, contiguity, "
      "dtype); returns Chorus's data type code. torch's dispatcher keeps some devices (meta) "
      "from reaching a backend on a CPU-only build, so tests call it directly.");
}
