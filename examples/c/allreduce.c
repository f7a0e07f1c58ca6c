/* Four ranks as threads of this process, driven from one thread with a
 * group (as with NCCL on four GPUs): allreduce, then check the sums. */
#include <chorus/chorus.h>
#include <stdio.h>

#define N 4
#define COUNT 1024
#define CHECK(call)                                                       \
  do {                                                                    \
    chorusResult_t res_ = (call);                                         \
    if (res_ != chorusSuccess) {                                          \
      fprintf(stderr, "%s: %s (%s)\n", #call, chorusGetErrorString(res_), \
              chorusGetLastError(NULL));                                  \
      return 1;                                                           \
    }                                                                     \
  } while (0)

int main(void) {
  static float buf[N][COUNT];
  chorusComm_t comms[N];
  CHECK(chorusCommInitAll(comms, N, NULL));
  for (int r = 0; r < N; ++r)
    for (int i = 0; i < COUNT; ++i) buf[r][i] = (float)(r + i);
  CHECK(chorusGroupStart());
  for (int r = 0; r < N; ++r)
    CHECK(chorusAllReduce(buf[r], buf[r], COUNT, chorusFloat, chorusSum, comms[r], NULL));
  CHECK(chorusGroupEnd());
  for (int r = 0; r < N; ++r)
    for (int i = 0; i < COUNT; ++i)
      if (buf[r][i] != (float)(N * i + N * (N - 1) / 2)) {
        printf("wrong at %d/%d\n", r, i);
        return 1;
      }
  for (int r = 0; r < N; ++r) CHECK(chorusCommDestroy(comms[r]));
  printf("allreduce on %d ranks: ok\n", N);
  return 0;
}
