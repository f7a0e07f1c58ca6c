/* The peer for `chorus perf`: the same sweep through OpenMPI's collectives
 * (MPI_Allreduce, MPI_Allgather, MPI_Reduce_scatter_block, MPI_Alltoall,
 * MPI_Bcast from rank 0 (in place by nature: the root's input is its output);
 * sendrecv = MPI_Sendrecv to the next rank from the previous, in place
 * MPI_Sendrecv_replace),
 * same sizes, same formulas, same CSV columns, so bench/peer_compare.sh can
 * put the two side by side from one run. Float32 sum only.
 *   mpirun -np N mpi_perf COLL MINBYTES MAXBYTES ITERS WARMUP [percentiles]
 *                                percentiles: also each form's median and
 *                                99th percentile time per call on rank 0,
 *                                as `chorus perf --percentiles` appends them
 *   mpirun -np N mpi_perf init   the slowest rank's MPI_Init, in ms, as
 *                                `chorus perf` times chorusCommInitFromEnv
 *                                (bench/init_compare.sh) */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double nowMs(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static double busFactor(const char* coll, int n) {
  if (strcmp(coll, "allreduce") == 0) return 2.0 * (n - 1) / n;
  if (strcmp(coll, "sendrecv") == 0 || strcmp(coll, "broadcast") == 0) return 1.0;
  return (double)(n - 1) / n;
}

static void call(const char* coll, int inplace, float* send, float* recv, size_t count, int n,
                 int rank) {
  int c = (int)count;
  if (strcmp(coll, "allreduce") == 0) {
    MPI_Allreduce(inplace ? MPI_IN_PLACE : send, recv, c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  } else if (strcmp(coll, "allgather") == 0) {
    if (inplace)
      MPI_Allgather(MPI_IN_PLACE, 0, MPI_FLOAT, recv, c, MPI_FLOAT, MPI_COMM_WORLD);
    else
      MPI_Allgather(send, c, MPI_FLOAT, recv, c, MPI_FLOAT, MPI_COMM_WORLD);
  } else if (strcmp(coll, "reducescatter") == 0) {
    if (inplace)
      MPI_Reduce_scatter_block(MPI_IN_PLACE, recv, c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    else
      MPI_Reduce_scatter_block(send, recv, c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  } else if (strcmp(coll, "broadcast") == 0) {
    (void)send;
    MPI_Bcast(recv, c, MPI_FLOAT, 0, MPI_COMM_WORLD);
  } else if (strcmp(coll, "sendrecv") == 0) {
    int next = (rank + 1) % n, prev = (rank + n - 1) % n;
    if (inplace)
      MPI_Sendrecv_replace(recv, c, MPI_FLOAT, next, 0, prev, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    else
      MPI_Sendrecv(send, c, MPI_FLOAT, next, 0, recv, c, MPI_FLOAT, prev, 0, MPI_COMM_WORLD,
                   MPI_STATUS_IGNORE);
  } else {
    if (inplace)
      MPI_Alltoall(MPI_IN_PLACE, 0, MPI_FLOAT, recv, c, MPI_FLOAT, MPI_COMM_WORLD);
    else
      MPI_Alltoall(send, c, MPI_FLOAT, recv, c, MPI_FLOAT, MPI_COMM_WORLD);
  }
}

static int byValue(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* Nearest rank: the index of the smallest of n sorted times that at least
 * a fraction p of them do not exceed. */
static int nearestRank(double p, int n) {
  int k = (int)ceil(p * n);
  return (k < 1 ? 1 : k > n ? n : k) - 1;
}

int main(int argc, char** argv) {
  const double before = nowMs();
  MPI_Init(&argc, &argv);
  double initMs = nowMs() - before;
  int n = 0, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (argc == 2 && strcmp(argv[1], "init") == 0) {
    MPI_Allreduce(MPI_IN_PLACE, &initMs, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) printf("init,%d,%.1f\n", n, initMs);
    MPI_Finalize();
    return 0;
  }
  const int percentiles = argc == 7 && strcmp(argv[6], "percentiles") == 0;
  if (argc != 6 && !percentiles) {
    if (rank == 0)
      fprintf(stderr, "usage: mpi_perf COLL MINBYTES MAXBYTES ITERS WARMUP [percentiles]\n");
    MPI_Finalize();
    return 2;
  }
  const char* coll = argv[1];
  size_t minB = strtoull(argv[2], NULL, 10), maxB = strtoull(argv[3], NULL, 10);
  int iters = atoi(argv[4]), warmup = atoi(argv[5]);
  int perRank = strcmp(coll, "allreduce") != 0 && strcmp(coll, "sendrecv") != 0 &&
                strcmp(coll, "broadcast") != 0;
  for (size_t bytes = minB; bytes <= maxB; bytes *= 2) {
    size_t count = bytes / 4 / (perRank ? (size_t)n : 1);
    size_t total = count * (perRank ? (size_t)n : 1);
    /* Buffers sized for the largest view, touched before timing. */
    float* send = malloc(total * sizeof(float));
    float* recv = malloc(total * sizeof(float));
    double us[2], p50[2], p99[2];
    double* perCall = percentiles ? malloc((size_t)iters * sizeof(double)) : NULL;
    for (int f = 0; f < 2; ++f) {
      for (size_t i = 0; i < total; ++i) send[i] = recv[i] = (float)(rank + (int)(i % 7));
      for (int i = 0; i < warmup; ++i) call(coll, f, send, recv, count, n, rank);
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      for (int i = 0; i < iters; ++i) {
        double c0 = percentiles ? MPI_Wtime() : 0;
        call(coll, f, send, recv, count, n, rank);
        if (percentiles) perCall[i] = (MPI_Wtime() - c0) * 1e6;
      }
      MPI_Barrier(MPI_COMM_WORLD);
      us[f] = (MPI_Wtime() - t0) * 1e6 / iters;
      if (percentiles) {
        qsort(perCall, (size_t)iters, sizeof(double), byValue);
        p50[f] = perCall[nearestRank(0.5, iters)];
        p99[f] = perCall[nearestRank(0.99, iters)];
      }
    }
    free(perCall);
    if (rank == 0) {
      double size = (double)(total * 4);
      printf("%s,%d,%zu,%zu,fp32,sum,-1", coll, n, total * 4, count);
      for (int f = 0; f < 2; ++f) {
        double alg = size / (us[f] * 1e-6) / 1e9;
        printf(",%.3f,%.4f,%.4f", us[f], alg, alg * busFactor(coll, n));
      }
      for (int f = 0; f < 2 && percentiles; ++f) printf(",%.3f,%.3f", p50[f], p99[f]);
      printf("\n");
      fflush(stdout);
    }
    free(send);
    free(recv);
  }
  MPI_Finalize();
  return 0;
}
