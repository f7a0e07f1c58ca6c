// One algorithm's calls cached unevenly across processes, for the `mp`
// tests: one rank of a job started by `chorus launch`. A process keeps a
// prepared call by its buffers, and an algorithm's rings are made again,
// larger, when a call wants larger slots (docs/scale.md). Here the ring
// allgather runs a small call, then a large one (its rings grow), then the
// small one again: rank 0 with the buffers it used before (its cached
// call, made on the old rings), the others with new ones (a new call, made
// on the current rings). Both ends of every ring must use the same rings,
// or each rank waits for a message sent on the other. Every element is
// checked; values are distinct per rank, round and element. Exit 0 only if
// everything was right.
#include <chorus/chorus.h>

#include <cstdio>
#include <vector>

namespace {

float value(int from, int round, size_t i) {
  return static_cast<float>((from * 7919 + round * 104729) % 65536 + static_cast<int>(i % 4096));
}

int rank = -1, n = 0, bad = 0;
chorusComm_t comm = nullptr;
chorusAlgoHandle_t ring = 0;

// An allgather of `count` elements per rank from `send` into `recv`.
void allgather(std::vector<float>& send, std::vector<float>& recv, size_t count, int round) {
  send.assign(count, 0);
  recv.assign(count * static_cast<size_t>(n), -1);
  for (size_t i = 0; i < count; ++i) send[i] = value(rank, round, i);
  if (chorusRunAlgo(send.data(), recv.data(), count, chorusFloat32, chorusSum, 0, ring, comm,
                    nullptr) != chorusSuccess) {
    std::printf("rank %d: round %d (%zu elements) failed: %s\n", rank, round, count,
                chorusGetLastError(comm));
    ++bad;
    return;
  }
  for (int from = 0; from < n; ++from)
    for (size_t i = 0; i < count; ++i)
      if (recv[static_cast<size_t>(from) * count + i] != value(from, round, i)) {
        std::printf("rank %d: round %d: element %zu from rank %d is %g, want %g\n", rank, round, i,
                    from, static_cast<double>(recv[static_cast<size_t>(from) * count + i]),
                    static_cast<double>(value(from, round, i)));
        ++bad;
        return;
      }
}

}  // namespace

int main() {
  if (chorusCommInitFromEnv(&comm) != chorusSuccess) {
    std::printf("init failed: %s\n", chorusGetLastError(nullptr));
    return 2;
  }
  chorusCommUserRank(comm, &rank);
  chorusCommCount(comm, &n);
  if (chorusLoadBuiltinAlgo("ring_allgather", n, 0, &ring) != chorusSuccess) {
    std::printf("rank %d: no ring_allgather: %s\n", rank, chorusGetLastError(nullptr));
    return 2;
  }
  const size_t small = 61, large = size_t{1} << 18;  // 244 B and 1 MiB per rank
  std::vector<float> send0, recv0, send1, recv1, sendLarge, recvLarge;
  allgather(send0, recv0, small, 0);
  allgather(sendLarge, recvLarge, large, 1);  // the rings grow
  for (int round = 2; round < 5; ++round) {
    // Rank 0: the same buffers (the call it made before); the rest: new ones.
    if (rank == 0)
      allgather(send0, recv0, small, round);
    else
      allgather(round % 2 == 0 ? send1 : send0, round % 2 == 0 ? recv1 : recv0, small, round);
  }
  chorusUnloadAlgo(ring);
  chorusCommDestroy(comm);
  std::printf("rank %d: %s\n", rank, bad == 0 ? "ok" : "FAILED");
  return bad == 0 ? 0 : 1;
}
