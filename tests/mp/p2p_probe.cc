// chorusSend / chorusRecv between processes, for the `mp` tests: one rank of
// a job started by `chorus launch`. Values are distinct per sender, receiver,
// round and element; every received element is checked. Patterns:
//   ring      send to r+1, receive from r-1 in one group, sizes 0 .. 12 MB
//             (pieces, and far more than the connection's ring holds)
//   swap      r and r^1 send each other 4 MB at once in one group
//   self      a send to itself meets a receive from itself
//   blocking  ungrouped calls: even ranks send then receive, odd the reverse
//   alltoall  grouped sends to and receives from every rank
// With PROBE_P2P_MISMATCH=1 instead: rank 1 receives 11 elements where rank
// 0 sends 10; rank 1 must fail with chorusInvalidArgument naming both sizes.
// Exit 0 only if everything was right.
#include <chorus/chorus.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

int32_t value(int from, int to, int round, size_t i) {
  return static_cast<int32_t>((from * 131 + to * 17 + round * 7919) % 1000 * 1000003 + i);
}

int rank = -1, n = 0, bad = 0;
chorusComm_t comm = nullptr;

void expectOk(chorusResult_t r, const char* what) {
  if (r != chorusSuccess) {
    std::printf("rank %d: %s failed: %s\n", rank, what, chorusGetLastError(nullptr));
    ++bad;
  }
}

void checkFrom(const std::vector<int32_t>& got, int from, int round, const char* what) {
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != value(from, rank, round, i)) {
      std::printf("rank %d: %s round %d: element %zu from rank %d is %d, want %d\n", rank, what,
                  round, i, from, got[i], value(from, rank, round, i));
      ++bad;
      return;
    }
}

std::vector<int32_t> outgoing(int to, int round, size_t count) {
  std::vector<int32_t> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = value(rank, to, round, i);
  return v;
}

}  // namespace

int main() {
  if (chorusCommInitFromEnv(&comm) != chorusSuccess) {
    std::printf("init failed: %s\n", chorusGetLastError(nullptr));
    return 2;
  }
  chorusCommUserRank(comm, &rank);
  chorusCommCount(comm, &n);
  const int next = (rank + 1) % n, prev = (rank + n - 1) % n;

  if (const char* m = std::getenv("PROBE_P2P_MISMATCH"); m != nullptr && *m == '1') {
    std::vector<int32_t> buf(11);
    chorusResult_t r = chorusSuccess;
    if (rank == 0) r = chorusSend(buf.data(), 10, chorusInt32, 1, comm, nullptr);
    if (rank == 1) r = chorusRecv(buf.data(), 11, chorusInt32, 0, comm, nullptr);
    std::printf("rank %d: %s: %s\n", rank, chorusGetErrorString(r), chorusGetLastError(nullptr));
    chorusCommDestroy(comm);
    if (rank != 1) return 0;
    std::string e = chorusGetLastError(nullptr);
    return r == chorusInvalidArgument && e.find("44 bytes") != std::string::npos &&
                   e.find("40 bytes") != std::string::npos
               ? 0
               : 1;
  }

  int round = 0;
  for (size_t count : {size_t{0}, size_t{1}, size_t{1000}, size_t{100000}, size_t{3} << 20}) {
    auto out = outgoing(next, round, count);
    std::vector<int32_t> in(count, -1);
    chorusGroupStart();
    chorusSend(out.data(), count, chorusInt32, next, comm, nullptr);
    chorusRecv(in.data(), count, chorusInt32, prev, comm, nullptr);
    expectOk(chorusGroupEnd(), "ring");
    checkFrom(in, prev, round++, "ring");
  }
  if (int partner = rank ^ 1; partner < n) {
    auto out = outgoing(partner, round, size_t{1} << 20);
    std::vector<int32_t> in(out.size(), -1);
    chorusGroupStart();
    chorusRecv(in.data(), in.size(), chorusInt32, partner, comm, nullptr);
    chorusSend(out.data(), out.size(), chorusInt32, partner, comm, nullptr);
    expectOk(chorusGroupEnd(), "swap");
    checkFrom(in, partner, round, "swap");
  }
  ++round;
  {
    auto out = outgoing(rank, round, 5000);
    std::vector<int32_t> in(out.size(), -1);
    chorusGroupStart();
    chorusSend(out.data(), out.size(), chorusInt32, rank, comm, nullptr);
    chorusRecv(in.data(), in.size(), chorusInt32, rank, comm, nullptr);
    expectOk(chorusGroupEnd(), "self");
    checkFrom(in, rank, round++, "self");
  }
  if (n % 2 == 0) {
    int partner = rank ^ 1;
    auto out = outgoing(partner, round, 777);
    std::vector<int32_t> in(out.size(), -1);
    if (rank % 2 == 0) {
      expectOk(chorusSend(out.data(), out.size(), chorusInt32, partner, comm, nullptr), "send");
      expectOk(chorusRecv(in.data(), in.size(), chorusInt32, partner, comm, nullptr), "recv");
    } else {
      expectOk(chorusRecv(in.data(), in.size(), chorusInt32, partner, comm, nullptr), "recv");
      expectOk(chorusSend(out.data(), out.size(), chorusInt32, partner, comm, nullptr), "send");
    }
    checkFrom(in, partner, round, "blocking");
  }
  ++round;
  {
    const size_t count = 70000;  // more than one piece per peer
    std::vector<std::vector<int32_t>> out, in(static_cast<size_t>(n));
    for (int p = 0; p < n; ++p) out.push_back(outgoing(p, round, count));
    chorusGroupStart();
    for (int p = 0; p < n; ++p) {
      in[static_cast<size_t>(p)].assign(count, -1);
      chorusSend(out[static_cast<size_t>(p)].data(), count, chorusInt32, p, comm, nullptr);
      chorusRecv(in[static_cast<size_t>(p)].data(), count, chorusInt32, p, comm, nullptr);
    }
    expectOk(chorusGroupEnd(), "alltoall");
    for (int p = 0; p < n; ++p) checkFrom(in[static_cast<size_t>(p)], p, round, "alltoall");
  }
  expectOk(chorusCommDestroy(comm), "destroy");
  std::printf("rank %d of %d: %s\n", rank, n, bad == 0 ? "send/recv ok" : "WRONG");
  return bad == 0 ? 0 : 1;
}
