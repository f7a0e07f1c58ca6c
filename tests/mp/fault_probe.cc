// A rank that runs allreduces until something goes wrong, for the fault
// tests: it prints how its calls ended and exits 0 only if every call it
// made succeeded. With PROBE_ODD_RANK=R, rank R passes a count the others
// do not (arguments that disagree across processes); with PROBE_ODD_TYPE=R,
// rank R passes int32 where the others pass float (the same bytes). With
// PROBE_KILL_RANK=R,
// rank R kills itself (SIGKILL) a few milliseconds after its
// PROBE_KILL_AFTER-th call (default 20), while it is in a later one: a
// death mid-collective that does not depend on how long start-up took.
#include <chorus/chorus.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

int main() {
  chorusComm_t comm = nullptr;
  if (chorusCommInitFromEnv(&comm) != chorusSuccess) {
    std::printf("init failed: %s\n", chorusGetLastError(nullptr));
    return 2;
  }
  int rank = -1;
  chorusCommUserRank(comm, &rank);
  const char* odd = std::getenv("PROBE_ODD_RANK");
  size_t count = size_t{1} << 18;
  if (odd != nullptr && std::atoi(odd) == rank) count += 4096;
  const char* oddType = std::getenv("PROBE_ODD_TYPE");
  const chorusDataType_t type =
      oddType != nullptr && std::atoi(oddType) == rank ? chorusInt32 : chorusFloat;
  std::vector<float> buf(count, 1.0f);
  const char* killRank = std::getenv("PROBE_KILL_RANK");
  const char* killAfter = std::getenv("PROBE_KILL_AFTER");
  const int dieAfter = killRank != nullptr && std::atoi(killRank) == rank
                           ? (killAfter != nullptr ? std::atoi(killAfter) : 20)
                           : -1;
  auto last = std::chrono::steady_clock::now();
  for (int i = 0; i < 200000; ++i) {
    chorusResult_t r =
        chorusAllReduce(buf.data(), buf.data(), buf.size(), type, chorusSum, comm, nullptr);
    if (r != chorusSuccess) {
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - last).count();
      std::printf("rank %d: call %d failed after %.1f s: %s: %s\n", rank, i, s,
                  chorusGetErrorString(r), chorusGetLastError(nullptr));
      chorusResult_t async = chorusSuccess;
      chorusCommGetAsyncError(comm, &async);
      chorusCommDestroy(comm);
      return r == chorusRemoteError || r == chorusTimeout ? 3 : 4;
    }
    last = std::chrono::steady_clock::now();
    for (float& x : buf) x = 1.0f;
    if (i == dieAfter)
      std::thread([] {
        std::this_thread::sleep_for(std::chrono::milliseconds(3));
        ::kill(::getpid(), SIGKILL);
      }).detach();
  }
  chorusCommDestroy(comm);
  return 0;
}
