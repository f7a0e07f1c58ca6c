// The Gloo peer for bench/peer_compare.sh: the same sweep as `chorus perf`
// and bench/mpi_perf through Gloo's collectives (gloo::allreduce,
// gloo::allgather, gloo::alltoall, gloo::broadcast from rank 0; TCP transport on loopback, the way
// PyTorch's CPU backend runs them), same sizes, same formulas, same CSV
// columns. Float32 sum, out of place (the in-place columns repeat a second
// out-of-place measurement: Gloo's allgather/alltoall have no in-place form).
// One process per rank, started by `chorus launch` (CHORUS_RANK,
// CHORUS_WORLD_SIZE, CHORUS_JOB_ID name the rank and the rendezvous
// directory).
//   chorus launch -n N -- gloo_perf COLL MINBYTES MAXBYTES ITERS WARMUP
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace {

double busFactor(const std::string& coll, int n) {
  if (coll == "allreduce") return 2.0 * (n - 1) / n;
  if (coll == "broadcast") return 1.0;
  return static_cast<double>(n - 1) / n;
}

void sumFloats(void* c, const void* a, const void* b, size_t n) {
  auto* out = static_cast<float*>(c);
  const auto* x = static_cast<const float*>(a);
  const auto* y = static_cast<const float*>(b);
  for (size_t i = 0; i < n; ++i) out[i] = x[i] + y[i];
}

void call(const std::shared_ptr<gloo::Context>& ctx, const std::string& coll, float* send,
          float* recv, size_t count, uint32_t tag) {
  if (coll == "allreduce") {
    gloo::AllreduceOptions o(ctx);
    o.setInput(send, count);
    o.setOutput(recv, count);
    o.setReduceFunction(&sumFloats);
    o.setTag(tag);
    gloo::allreduce(o);
  } else if (coll == "broadcast") {
    gloo::BroadcastOptions o(ctx);
    if (ctx->rank == 0) o.setInput(send, count);
    o.setOutput(recv, count);
    o.setRoot(0);
    o.setTag(tag);
    gloo::broadcast(o);
  } else if (coll == "allgather") {
    gloo::AllgatherOptions o(ctx);
    o.setInput(send, count);
    o.setOutput(recv, count * static_cast<size_t>(ctx->size));
    o.setTag(tag);
    gloo::allgather(o);
  } else {
    gloo::AlltoallOptions o(ctx);
    o.setInput(send, count * static_cast<size_t>(ctx->size));
    o.setOutput(recv, count * static_cast<size_t>(ctx->size));
    o.setTag(tag);
    gloo::alltoall(o);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const char* r = std::getenv("CHORUS_RANK");
  const char* w = std::getenv("CHORUS_WORLD_SIZE");
  const char* job = std::getenv("CHORUS_JOB_ID");
  if (argc != 6 || r == nullptr || w == nullptr || job == nullptr) {
    std::fprintf(stderr,
                 "usage: chorus launch -n N -- gloo_perf COLL MINBYTES MAXBYTES ITERS WARMUP\n");
    return 2;
  }
  const std::string coll = argv[1];
  if (coll != "allreduce" && coll != "allgather" && coll != "alltoall" && coll != "broadcast") {
    std::fprintf(stderr,
                 "gloo_perf: %s: Gloo's peers here are allreduce, allgather, alltoall, broadcast\n",
                 coll.c_str());
    return 2;
  }
  const int rank = std::atoi(r), n = std::atoi(w);
  const size_t minB = std::strtoull(argv[2], nullptr, 10),
               maxB = std::strtoull(argv[3], nullptr, 10);
  const int iters = std::atoi(argv[4]), warmup = std::atoi(argv[5]);

  std::string dir = std::string("/tmp/") + job + "-gloo";
  ::mkdir(dir.c_str(), 0700);
  gloo::rendezvous::FileStore store(dir);
  gloo::transport::tcp::attr attr("127.0.0.1");
  auto dev = gloo::transport::tcp::CreateDevice(attr);
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, n);
  ctx->connectFullMesh(store, dev);

  const bool perRank = coll != "allreduce" && coll != "broadcast";
  uint32_t tag = 0;
  for (size_t bytes = minB; bytes <= maxB; bytes *= 2) {
    size_t count = bytes / 4 / (perRank ? static_cast<size_t>(n) : 1);
    size_t total = count * (perRank ? static_cast<size_t>(n) : 1);
    std::vector<float> send(total), recv(total);
    double us[2];
    for (int f = 0; f < 2; ++f) {
      for (size_t i = 0; i < total; ++i) send[i] = recv[i] = static_cast<float>(rank + i % 7);
      for (int i = 0; i < warmup; ++i) call(ctx, coll, send.data(), recv.data(), count, ++tag);
      gloo::BarrierOptions b(ctx);
      gloo::barrier(b);
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < iters; ++i) call(ctx, coll, send.data(), recv.data(), count, ++tag);
      gloo::barrier(b);
      us[f] =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
          iters;
    }
    if (rank == 0) {
      double size = static_cast<double>(total * 4);
      std::printf("%s,%d,%zu,%zu,fp32,sum,-1", coll.c_str(), n, total * 4, count);
      for (double t : us) {
        double alg = size / (t * 1e-6) / 1e9;
        std::printf(",%.3f,%.4f,%.4f", t, alg, alg * busFactor(coll, n));
      }
      std::printf("\n");
      std::fflush(stdout);
    }
  }
  gloo::BarrierOptions done(ctx);
  gloo::barrier(done);
  if (rank == 0) std::filesystem::remove_all(dir);
  return 0;
}
