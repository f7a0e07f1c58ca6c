/* The C API from an installed Chorus: 4 thread ranks of this process
 * allreduce from one thread in a group; every element is checked. */
#include <chorus/chorus.h>
#include <stdio.h>

#define RANKS 4
#define COUNT 1000

int main(void) {
  int version = 0;
  if (chorusGetVersion(&version) != chorusSuccess || version != CHORUS_VERSION_CODE) {
    fprintf(stderr, "consumer_c: library version %d, header %d\n", version, CHORUS_VERSION_CODE);
    return 1;
  }
  chorusComm_t comms[RANKS];
  if (chorusCommInitAll(comms, RANKS, NULL) != chorusSuccess) {
    fprintf(stderr, "consumer_c: %s\n", chorusGetLastError(NULL));
    return 1;
  }
  static float send[RANKS][COUNT], recv[RANKS][COUNT];
  for (int r = 0; r < RANKS; ++r)
    for (int i = 0; i < COUNT; ++i) send[r][i] = (float)(r * COUNT + i);
  chorusGroupStart();
  for (int r = 0; r < RANKS; ++r)
    chorusAllReduce(send[r], recv[r], COUNT, chorusFloat32, chorusSum, comms[r], NULL);
  if (chorusGroupEnd() != chorusSuccess) {
    fprintf(stderr, "consumer_c: %s\n", chorusGetLastError(NULL));
    return 1;
  }
  int wrong = 0;
  for (int r = 0; r < RANKS; ++r)
    for (int i = 0; i < COUNT; ++i) {
      /* sum over ranks of (rank * COUNT + i): exact in float at this size */
      float want = (float)(COUNT * (RANKS * (RANKS - 1) / 2) + RANKS * i);
      if (recv[r][i] != want) ++wrong;
    }
  for (int r = 0; r < RANKS; ++r) chorusCommDestroy(comms[r]);
  /* A bad argument is an error code and a message, not a crash. */
  if (chorusAllReduce(send[0], recv[0], COUNT, (chorusDataType_t)99, chorusSum, NULL, NULL) ==
      chorusSuccess) {
    fprintf(stderr, "consumer_c: a NULL communicator was accepted\n");
    return 1;
  }
  printf("consumer_c: allreduce on %d ranks, %d wrong of %d\n", RANKS, wrong, RANKS * COUNT);
  return wrong == 0 ? 0 : 1;
}
