/*
 * A program written against NCCL's API (nccl.h), nothing of Chorus's: it
 * runs every collective on N ranks of one process and checks the data
 * exactly (values distinct per rank and element). Link it against NCCL or
 * against libchorus-nccl: the same source checks both.
 *
 *   nccl_check [--ranks N] [--count C] [--init threads|group|all] [--host] [--graph]
 *              [--no-p2p]
 *
 * --init threads: one thread per rank, ncclCommInitRank in each (default);
 *        group:   one thread, ncclCommInitRank for every rank in a group
 *                 with a first allreduce on them, every call in groups;
 *        all:     one thread, ncclCommInitAll.
 * --host: buffers in host memory, no CUDA calls (libchorus-nccl with
 *         CHORUS_NCCL_HOST=1: ranks on host threads). Otherwise buffers are
 *         cudaMalloc'ed on GPU 0 and every rank has its own stream; with no
 *         GPU the program exits 77 (skipped).
 * --graph: also capture an allreduce of every rank in a CUDA graph and
 *          replay it 100 times with new inputs, each checked, and print
 *          the time per call of eager calls and of replays (GPU only).
 * --no-p2p: leave out ncclSend/ncclRecv.
 * Exit 0 when every check passed; 1 naming each failure.
 */
#include <cuda_runtime.h>
#include <nccl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAXR 16
/* Elements per rank (--count): by default not a multiple of any chunking. */
static size_t C = 1031;

static int nranks = 4, host = 0, graph = 0, p2p = 1;
static enum { kThreads, kGroup, kAll } initMode = kThreads;
static ncclComm_t comms[MAXR];
static cudaStream_t streams[MAXR];
static int failures = 0;
static pthread_mutex_t failMu = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t barrier;

static void failf(const char* what, int rank, size_t i, double got, double want) {
  pthread_mutex_lock(&failMu);
  if (failures++ < 20)
    fprintf(stderr, "FAIL %s: rank %d element %zu: got %g, want %g\n", what, rank, i, got, want);
  pthread_mutex_unlock(&failMu);
}

#define NCCLCHECK(call)                                                                          \
  do {                                                                                           \
    ncclResult_t r_ = (call);                                                                    \
    if (r_ != ncclSuccess) {                                                                     \
      fprintf(stderr, "%s:%d: %s: %s (%s)\n", __FILE__, __LINE__, #call, ncclGetErrorString(r_), \
              ncclGetLastError(NULL));                                                           \
      exit(1);                                                                                   \
    }                                                                                            \
  } while (0)
#define CUDACHECK(call)                                                                      \
  do {                                                                                       \
    cudaError_t e_ = (call);                                                                 \
    if (e_ != cudaSuccess) {                                                                 \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      exit(1);                                                                               \
    }                                                                                        \
  } while (0)

/* ---- memory on the ranks' side ---- */

static void* alloc(size_t bytes) {
  void* p = NULL;
  if (host) {
    p = calloc(1, bytes);
  } else {
    CUDACHECK(cudaMalloc(&p, bytes));
    CUDACHECK(cudaMemset(p, 0, bytes));
  }
  return p;
}
static void release(void* p) {
  if (host)
    free(p);
  else
    CUDACHECK(cudaFree(p));
}
static void put(void* dst, const void* src, size_t bytes) {
  if (host) {
    memcpy(dst, src, bytes);
  } else {
    /* From pageable memory cudaMemcpy may return before the copy lands,
     * and the ranks' streams are non-blocking: wait for it (seen on an
     * H200: a graph replay read the previous inputs' last 64 KiB). */
    CUDACHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
    CUDACHECK(cudaStreamSynchronize(0));
  }
}
static void get(void* dst, const void* src, size_t bytes) {
  if (host)
    memcpy(dst, src, bytes);
  else
    CUDACHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}
/* Whether the NCCL this process loaded is libchorus-nccl. */
static int onChorus(void) {
  FILE* f = fopen("/proc/self/maps", "r");
  char line[4096];
  int found = 0;
  if (f == NULL) return 0;
  while (!found && fgets(line, sizeof line, f) != NULL)
    found = strstr(line, "libchorus-nccl") != NULL;
  fclose(f);
  return found;
}
static void sync(int r) {
  if (!host) CUDACHECK(cudaStreamSynchronize(streams[r]));
}

/* bf16 of a small integer (exact), and back. */
static uint16_t toBf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)(u >> 16);
}
static float fromBf16(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* ---- one check: per-rank buffers, fill, issue, verify ---- */

typedef struct {
  void* send[MAXR];
  void* recv[MAXR];
} Bufs;

typedef struct Check Check;
struct Check {
  const char* name;
  int sendBlocks, recvBlocks; /* per rank, in blocks of C 4-byte elements */
  int inplace;                /* recv aliases send (at the collective's in-place offset) */
  void (*fill)(int r, void* hostSend);
  ncclResult_t (*issue)(const Check* c, Bufs* b, int r);
  void (*verify)(const Check* c, int r, const void* hostRecv);
};

static size_t inplaceOffset(const Check* c, int r);

static size_t sendBytes(const Check* c) { return (size_t)c->sendBlocks * C * 4; }
static size_t recvBytes(const Check* c) { return (size_t)c->recvBlocks * C * 4; }

static void setup(const Check* c, Bufs* b, int r) {
  size_t bytes = sendBytes(c) > recvBytes(c) ? sendBytes(c) : recvBytes(c);
  void* h = calloc(1, bytes);
  c->fill(r, h);
  if (c->inplace) {
    b->recv[r] = alloc(bytes);
    b->send[r] = (char*)b->recv[r] + inplaceOffset(c, r);
    put(b->send[r], h, sendBytes(c));
  } else {
    b->send[r] = alloc(sendBytes(c));
    b->recv[r] = alloc(recvBytes(c));
    put(b->send[r], h, sendBytes(c));
  }
  free(h);
}
static void finish(const Check* c, Bufs* b, int r) {
  void* h = calloc(1, recvBytes(c));
  get(h, b->recv[r], recvBytes(c));
  c->verify(c, r, h);
  free(h);
  if (!c->inplace) release(b->send[r]);
  release(b->recv[r]);
}

/* allreduce float sum: x = r*1000 + i%97 */
static void fillSum(int r, void* s) {
  for (size_t i = 0; i < C; ++i) ((float*)s)[i] = (float)(r * 1000 + (int)(i % 97));
}
static ncclResult_t issueSum(const Check* c, Bufs* b, int r) {
  (void)c;
  return ncclAllReduce(b->send[r], b->recv[r], C, ncclFloat, ncclSum, comms[r], streams[r]);
}
static void verifySum(const Check* c, int r, const void* out) {
  for (size_t i = 0; i < C; ++i) {
    double want = 1000.0 * nranks * (nranks - 1) / 2 + (double)nranks * (double)(i % 97);
    if (((const float*)out)[i] != want) failf(c->name, r, i, ((const float*)out)[i], want);
  }
}

/* allreduce int32 prod: x = r%3 + 1 + (i%2) */
static void fillProd(int r, void* s) {
  for (size_t i = 0; i < C; ++i) ((int32_t*)s)[i] = r % 3 + 1 + (int)(i % 2);
}
static ncclResult_t issueProd(const Check* c, Bufs* b, int r) {
  (void)c;
  return ncclAllReduce(b->send[r], b->recv[r], C, ncclInt32, ncclProd, comms[r], streams[r]);
}
static void verifyProd(const Check* c, int r, const void* out) {
  for (size_t i = 0; i < C; ++i) {
    int64_t want = 1;
    for (int q = 0; q < nranks; ++q) want *= q % 3 + 1 + (int)(i % 2);
    if (((const int32_t*)out)[i] != (int32_t)want)
      failf(c->name, r, i, ((const int32_t*)out)[i], (double)want);
  }
}

/* allreduce float max and min: x = (7i + 13r) % 101 */
static void fillMax(int r, void* s) {
  for (size_t i = 0; i < C; ++i) ((float*)s)[i] = (float)((7 * (int)i + 13 * r) % 101);
}
static ncclResult_t issueMax(const Check* c, Bufs* b, int r) {
  (void)c;
  return ncclAllReduce(b->send[r], b->recv[r], C, ncclFloat, ncclMax, comms[r], streams[r]);
}
static ncclResult_t issueMin(const Check* c, Bufs* b, int r) {
  (void)c;
  return ncclAllReduce(b->send[r], b->recv[r], C, ncclFloat, ncclMin, comms[r], streams[r]);
}
static void verifyMaxMin(const Check* c, int r, const void* out, int isMax) {
  for (size_t i = 0; i < C; ++i) {
    int want = isMax ? -1 : 1000;
    for (int q = 0; q < nranks; ++q) {
      int v = (7 * (int)i + 13 * q) % 101;
      if (isMax ? v > want : v < want) want = v;
    }
    if (((const float*)out)[i] != (float)want) failf(c->name, r, i, ((const float*)out)[i], want);
  }
}
static void verifyMax(const Check* c, int r, const void* out) { verifyMaxMin(c, r, out, 1); }
static void verifyMin(const Check* c, int r, const void* out) { verifyMaxMin(c, r, out, 0); }

/* allreduce float avg, in place: x = n * (r + i%7): the mean is exact */
static void fillAvg(int r, void* s) {
  for (size_t i = 0; i < C; ++i) ((float*)s)[i] = (float)(nranks * (r + (int)(i % 7)));
}
static ncclResult_t issueAvg(const Check* c, Bufs* b, int r) {
  (void)c;
  return ncclAllReduce(b->send[r], b->recv[r], C, ncclFloat, ncclAvg, comms[r], streams[r]);
}
static void verifyAvg(const Check* c, int r, const void* out) {
  for (size_t i = 0; i < C; ++i) {
    double want = (double)nranks * (nranks - 1) / 2 + (double)nranks * (double)(i % 7);
    if (((const float*)out)[i] != want) failf(c->name, r, i, ((const float*)out)[i], want);
  }
}

/* allreduce bf16 sum: x = r + i%4 (sums stay exact in bf16) */
static void fillBf16(int r, void* s) {
  for (size_t i = 0; i < C; ++i) ((uint16_t*)s)[i] = toBf16((float)(r + (int)(i % 4)));
}
static ncclResult_t issueBf16(const Check* c, Bufs* b, int r) {
  (void)c;
  return ncclAllReduce(b->send[r], b->recv[r], C, ncclBfloat16, ncclSum, comms[r], streams[r]);
}
static void verifyBf16(const Check* c, int r, const void* out) {
  for (size_t i = 0; i < C; ++i) {
    double want = (double)nranks * (nranks - 1) / 2 + (double)nranks * (double)(i % 4);
    float got = fromBf16(((const uint16_t*)out)[i]);
    if (got != want) failf(c->name, r, i, got, want);
  }
}

/* premulsum: rank r scales by r+1 (host immediate) or by 0.5 (device scalar) */
static ncclRedOp_t premulOps[MAXR];
static float* deviceScalars[MAXR];
static void fillPremul(int r, void* s) {
  (void)r;
  for (size_t i = 0; i < C; ++i) ((float*)s)[i] = (float)(2 * (int)(i % 11));
}
static ncclResult_t issuePremul(const Check* c, Bufs* b, int r) {
  (void)c;
  float scalar = (float)(r + 1);
  NCCLCHECK(ncclRedOpCreatePreMulSum(&premulOps[r], &scalar, ncclFloat, ncclScalarHostImmediate,
                                     comms[r]));
  return ncclAllReduce(b->send[r], b->recv[r], C, ncclFloat, premulOps[r], comms[r], streams[r]);
}
static void verifyPremul(const Check* c, int r, const void* out) {
  NCCLCHECK(ncclRedOpDestroy(premulOps[r], comms[r]));
  for (size_t i = 0; i < C; ++i) {
    double want = 2.0 * (double)(i % 11) * nranks * (nranks + 1) / 2;
    if (((const float*)out)[i] != want) failf(c->name, r, i, ((const float*)out)[i], want);
  }
}
static ncclResult_t issuePremulDevice(const Check* c, Bufs* b, int r) {
  (void)c;
  float half = 0.5f;
  deviceScalars[r] = (float*)alloc(sizeof(float));
  put(deviceScalars[r], &half, sizeof half);
  NCCLCHECK(ncclRedOpCreatePreMulSum(&premulOps[r], deviceScalars[r], ncclFloat, ncclScalarDevice,
                                     comms[r]));
  return ncclReduceScatter(b->send[r], b->recv[r], C / (size_t)nranks, ncclFloat, premulOps[r],
                           comms[r], streams[r]);
}
static void verifyPremulDevice(const Check* c, int r, const void* out) {
  NCCLCHECK(ncclRedOpDestroy(premulOps[r], comms[r]));
  release(deviceScalars[r]);
  size_t per = C / (size_t)nranks;
  for (size_t i = 0; i < per; ++i) {
    size_t j = (size_t)r * per + i;
    double want = 0.5 * 2.0 * (double)(j % 11) * nranks;
    if (((const float*)out)[i] != want) failf(c->name, r, i, ((const float*)out)[i], want);
  }
}

/* broadcast from the last rank: x = 5i + 3 there, -1 elsewhere */
static void fillBcast(int r, void* s) {
  for (size_t i = 0; i < C; ++i) ((int32_t*)s)[i] = r == nranks - 1 ? 5 * (int)i + 3 : -1;
}
static ncclResult_t issueBcast(const Check* c, Bufs* b, int r) {
  (void)c;
  /* Host ranks other than the root pass NULL for the buffer they do not use. */
  return ncclBroadcast(host && r != nranks - 1 ? NULL : b->send[r], b->recv[r], C, ncclInt32,
                       nranks - 1, comms[r], streams[r]);
}
static ncclResult_t issueBcastInPlace(const Check* c, Bufs* b, int r) {
  (void)c;
  return ncclBcast(b->recv[r], C, ncclInt32, nranks - 1, comms[r], streams[r]);
}
static void verifyBcast(const Check* c, int r, const void* out) {
  for (size_t i = 0; i < C; ++i)
    if (((const int32_t*)out)[i] != 5 * (int)i + 3)
      failf(c->name, r, i, ((const int32_t*)out)[i], 5 * (int)i + 3);
}

/* reduce to rank 1 % n: x = r*10 + i%13 */
static void fillReduce(int r, void* s) {
  for (size_t i = 0; i < C; ++i) ((int32_t*)s)[i] = r * 10 + (int)(i % 13);
}
static ncclResult_t issueReduce(const Check* c, Bufs* b, int r) {
  (void)c;
  return ncclReduce(b->send[r], host && r != 1 % nranks ? NULL : b->recv[r], C, ncclInt32, ncclSum,
                    1 % nranks, comms[r], streams[r]);
}
static void verifyReduce(const Check* c, int r, const void* out) {
  if (r != 1 % nranks) return;
  for (size_t i = 0; i < C; ++i) {
    int want = 10 * nranks * (nranks - 1) / 2 + nranks * (int)(i % 13);
    if (((const int32_t*)out)[i] != want) failf(c->name, r, i, ((const int32_t*)out)[i], want);
  }
}

/* allgather: rank r contributes r*C + i */
static void fillGather(int r, void* s) {
  for (size_t i = 0; i < C; ++i) ((int32_t*)s)[i] = r * C + (int)i;
}
static ncclResult_t issueAllGather(const Check* c, Bufs* b, int r) {
  (void)c;
  return ncclAllGather(b->send[r], b->recv[r], C, ncclInt32, comms[r], streams[r]);
}
static void verifyAllGather(const Check* c, int r, const void* out) {
  for (size_t j = 0; j < (size_t)nranks * C; ++j)
    if (((const int32_t*)out)[j] != (int)j) failf(c->name, r, j, ((const int32_t*)out)[j], (int)j);
}

/* reducescatter: x[j] = r + j over n*C elements */
static void fillRs(int r, void* s) {
  for (size_t j = 0; j < (size_t)nranks * C; ++j) ((int32_t*)s)[j] = r + (int)j;
}
static ncclResult_t issueRs(const Check* c, Bufs* b, int r) {
  (void)c;
  return ncclReduceScatter(b->send[r], b->recv[r], C, ncclInt32, ncclSum, comms[r], streams[r]);
}
static void verifyRs(const Check* c, int r, const void* out) {
  for (size_t i = 0; i < C; ++i) {
    int want = nranks * (nranks - 1) / 2 + nranks * (r * C + (int)i);
    if (((const int32_t*)out)[i] != want) failf(c->name, r, i, ((const int32_t*)out)[i], want);
  }
}

/* alltoall: block q of rank r holds r*1000000 + q*1000 + i%1000 */
static void fillA2a(int r, void* s) {
  for (int q = 0; q < nranks; ++q)
    for (size_t i = 0; i < C; ++i)
      ((int32_t*)s)[(size_t)q * C + i] = r * 1000000 + q * 1000 + (int)(i % 1000);
}
static ncclResult_t issueA2a(const Check* c, Bufs* b, int r) {
  (void)c;
  return ncclAlltoAll(b->send[r], b->recv[r], C, ncclInt32, comms[r], streams[r]);
}
static void verifyA2a(const Check* c, int r, const void* out) {
  for (int q = 0; q < nranks; ++q)
    for (size_t i = 0; i < C; ++i) {
      int want = q * 1000000 + r * 1000 + (int)(i % 1000);
      if (((const int32_t*)out)[(size_t)q * C + i] != want)
        failf(c->name, r, (size_t)q * C + i, ((const int32_t*)out)[(size_t)q * C + i], want);
    }
}

/* gather to rank 0 (host: non-roots pass a NULL recvbuff, as NCCL allows) */
static ncclResult_t issueGather(const Check* c, Bufs* b, int r) {
  (void)c;
  return ncclGather(b->send[r], host && r != 0 ? NULL : b->recv[r], C, ncclInt32, 0, comms[r],
                    streams[r]);
}
static void verifyGather(const Check* c, int r, const void* out) {
  if (r == 0) verifyAllGather(c, r, out);
}

/* scatter from the last rank: block q is q*7 + i */
static void fillScatter(int r, void* s) {
  for (int q = 0; q < nranks; ++q)
    for (size_t i = 0; i < C; ++i)
      ((int32_t*)s)[(size_t)q * C + i] = r == nranks - 1 ? q * 7 + (int)i : -1;
}
static ncclResult_t issueScatter(const Check* c, Bufs* b, int r) {
  (void)c;
  return ncclScatter(host && r != nranks - 1 ? NULL : b->send[r], b->recv[r], C, ncclInt32,
                     nranks - 1, comms[r], streams[r]);
}
static void verifyScatter(const Check* c, int r, const void* out) {
  for (size_t i = 0; i < C; ++i)
    if (((const int32_t*)out)[i] != r * 7 + (int)i)
      failf(c->name, r, i, ((const int32_t*)out)[i], r * 7 + (int)i);
}

/* send to r+1, receive from r-1, in one group */
static void fillRing(int r, void* s) {
  for (size_t i = 0; i < C; ++i) ((int32_t*)s)[i] = r * 100000 + (int)i;
}
static ncclResult_t issueRing(const Check* c, Bufs* b, int r) {
  (void)c;
  ncclResult_t e = ncclSend(b->send[r], C, ncclInt32, (r + 1) % nranks, comms[r], streams[r]);
  if (e != ncclSuccess) return e;
  return ncclRecv(b->recv[r], C, ncclInt32, (r + nranks - 1) % nranks, comms[r], streams[r]);
}
static void verifyRing(const Check* c, int r, const void* out) {
  int from = (r + nranks - 1) % nranks;
  for (size_t i = 0; i < C; ++i)
    if (((const int32_t*)out)[i] != from * 100000 + (int)i)
      failf(c->name, r, i, ((const int32_t*)out)[i], from * 100000 + (int)i);
}

/* Where the send buffer sits in the receive buffer of an in-place call. */
static size_t inplaceOffset(const Check* c, int r) {
  return c->issue == issueAllGather ? (size_t)r * C * 4 : 0;
}

static Check checks[] = {
    {"allreduce sum float", 1, 1, 0, fillSum, issueSum, verifySum},
    {"allreduce sum float in place", 1, 1, 1, fillSum, issueSum, verifySum},
    {"allreduce prod int32", 1, 1, 0, fillProd, issueProd, verifyProd},
    {"allreduce max float", 1, 1, 0, fillMax, issueMax, verifyMax},
    {"allreduce min float", 1, 1, 1, fillMax, issueMin, verifyMin},
    {"allreduce avg float in place", 1, 1, 1, fillAvg, issueAvg, verifyAvg},
    {"allreduce sum bf16", 1, 1, 0, fillBf16, issueBf16, verifyBf16},
    {"allreduce premulsum (host scalar)", 1, 1, 0, fillPremul, issuePremul, verifyPremul},
    {"reducescatter premulsum (device scalar)", 1, 1, 0, fillPremul, issuePremulDevice,
     verifyPremulDevice},
    {"broadcast", 1, 1, 0, fillBcast, issueBcast, verifyBcast},
    {"bcast in place", 1, 1, 1, fillBcast, issueBcastInPlace, verifyBcast},
    {"reduce", 1, 1, 0, fillReduce, issueReduce, verifyReduce},
    {"allgather", 1, MAXR, 0, fillGather, issueAllGather, verifyAllGather},
    {"allgather in place", 1, MAXR, 1, fillGather, issueAllGather, verifyAllGather},
    {"reducescatter", MAXR, 1, 0, fillRs, issueRs, verifyRs},
    {"alltoall", MAXR, MAXR, 0, fillA2a, issueA2a, verifyA2a},
    {"gather", 1, MAXR, 0, fillGather, issueGather, verifyGather},
    {"scatter", MAXR, 1, 0, fillScatter, issueScatter, verifyScatter},
    {"send/recv ring", 1, 1, 0, fillRing, issueRing, verifyRing},
};
enum { kChecks = sizeof checks / sizeof checks[0] };

static int wanted(const Check* c) { return p2p || c->issue != issueRing; }

/* ---- drivers ---- */

static ncclUniqueId uid;

static void checkArgs(int r) {
  /* Arguments NCCL refuses, and calls that are no-ops. */
  float x = 0;
  if (ncclAllReduce(&x, &x, 1, (ncclDataType_t)99, ncclSum, comms[r], streams[r]) !=
      ncclInvalidArgument)
    failf("bad data type refused", r, 0, 0, 0);
  if (ncclAllReduce(&x, &x, 1, ncclFloat, (ncclRedOp_t)77, comms[r], streams[r]) !=
      ncclInvalidArgument)
    failf("unknown reduction refused", r, 0, 0, 0);
  if (ncclBroadcast(&x, &x, 1, ncclFloat, nranks, comms[r], streams[r]) != ncclInvalidArgument)
    failf("bad root refused", r, 0, 0, 0);
  if (ncclRedOpDestroy(ncclSum, comms[r]) != ncclInvalidArgument)
    failf("builtin op not destroyable", r, 0, 0, 0);
  if (ncclAllReduce(NULL, NULL, 0, ncclFloat, ncclSum, comms[r], streams[r]) != ncclSuccess)
    failf("count 0 is a no-op", r, 0, 0, 0);
  int n = -1, me = -1, dev = -2;
  NCCLCHECK(ncclCommCount(comms[r], &n));
  NCCLCHECK(ncclCommUserRank(comms[r], &me));
  NCCLCHECK(ncclCommCuDevice(comms[r], &dev));
  if (n != nranks || me != r) failf("count and rank", r, 0, n * 100 + me, nranks * 100 + r);
  if (!host && dev != 0) failf("cuda device", r, 0, dev, 0);
  ncclResult_t async = ncclInternalError;
  NCCLCHECK(ncclCommGetAsyncError(comms[r], &async));
  if (async != ncclSuccess) failf("no async error", r, 0, async, 0);
  /* Registrations: real handles, refused when given back twice. Windows
   * are made on ncclMemAlloc memory (NCCL 2.28 makes them only on cuMem
   * allocations: on a cudaMalloc buffer it fails with
   * ncclUnhandledCudaError, and so does Chorus). */
  void* buf = alloc(4096);
  void* winBuf = NULL;
  void* handle = NULL;
  ncclWindow_t win = NULL;
  NCCLCHECK(ncclMemAlloc(&winBuf, 4096));
  NCCLCHECK(ncclCommRegister(comms[r], buf, 4096, &handle));
  NCCLCHECK(ncclCommWindowRegister(comms[r], winBuf, 4096, &win, NCCL_WIN_COLL_SYMMETRIC));
  NCCLCHECK(ncclCommDeregister(comms[r], handle));
  NCCLCHECK(ncclCommWindowDeregister(comms[r], win));
  /* Given back twice: NCCL (2.28.9, seen on an H200) does not refuse it,
   * and the handle is gone there, so this is asked of Chorus alone. */
  if (onChorus() && (ncclCommDeregister(comms[r], handle) != ncclInvalidArgument ||
                     ncclCommWindowDeregister(comms[r], win) != ncclInvalidArgument))
    failf("a registration given back twice is refused", r, 0, 0, 1);
  if (!host) {
    ncclWindow_t bad = NULL;
    ncclResult_t got = ncclCommWindowRegister(comms[r], buf, 4096, &bad, NCCL_WIN_COLL_SYMMETRIC);
    if (got != ncclUnhandledCudaError)
      failf("a window on cudaMalloc memory is refused", r, 0, got, ncclUnhandledCudaError);
  }
  NCCLCHECK(ncclMemFree(winBuf));
  release(buf);
}

/* Split by parity, ordered by descending rank; an allreduce of the parent
 * ranks over each half. */
static void checkSplit(int r) {
  ncclComm_t sub = NULL;
  NCCLCHECK(ncclCommSplit(comms[r], r % 2, -r, &sub, NULL));
  int n = 0, me = -1;
  NCCLCHECK(ncclCommCount(sub, &n));
  NCCLCHECK(ncclCommUserRank(sub, &me));
  int members = 0, above = 0, sum = 0;
  for (int q = 0; q < nranks; ++q)
    if (q % 2 == r % 2) {
      ++members;
      sum += q;
      if (q > r) ++above;
    }
  if (n != members || me != above)
    failf("split size and rank", r, 0, n * 100 + me, members * 100 + above);
  int32_t* buf = (int32_t*)alloc(sizeof(int32_t));
  int32_t v = r;
  put(buf, &v, sizeof v);
  NCCLCHECK(ncclAllReduce(buf, buf, 1, ncclInt32, ncclSum, sub, streams[r]));
  sync(r);
  get(&v, buf, sizeof v);
  if (v != sum) failf("split allreduce", r, 0, v, sum);
  release(buf);
  ncclComm_t none = (ncclComm_t)1;
  NCCLCHECK(ncclCommSplit(comms[r], NCCL_SPLIT_NOCOLOR, 0, &none, NULL));
  if (none != NULL) failf("NCCL_SPLIT_NOCOLOR gives NULL", r, 0, 1, 0);
  NCCLCHECK(ncclCommDestroy(sub));
}

/* ncclCommShrink: the last rank is left out (and does not call); the
 * others get ranks in their old order and sum them. */
static void checkShrink(int r) {
  if (nranks < 3 || r == nranks - 1) return;
  int last[1] = {nranks - 1};
  ncclComm_t rest = NULL;
  NCCLCHECK(ncclCommShrink(comms[r], last, 1, &rest, NULL, NCCL_SHRINK_DEFAULT));
  int n = 0, me = -1;
  NCCLCHECK(ncclCommCount(rest, &n));
  NCCLCHECK(ncclCommUserRank(rest, &me));
  if (n != nranks - 1 || me != r)
    failf("shrink size and rank", r, 0, n * 100 + me, (nranks - 1) * 100 + r);
  int32_t* buf = (int32_t*)alloc(sizeof(int32_t));
  int32_t v = r;
  put(buf, &v, sizeof v);
  NCCLCHECK(ncclAllReduce(buf, buf, 1, ncclInt32, ncclSum, rest, streams[r]));
  sync(r);
  get(&v, buf, sizeof v);
  if (v != (nranks - 1) * (nranks - 2) / 2)
    failf("shrink allreduce", r, 0, v, (nranks - 1) * (nranks - 2) / 2);
  release(buf);
  NCCLCHECK(ncclCommDestroy(rest));
}

/* ncclCommRevoke: rank 0 revokes a copy of the communicator; its later
 * calls are refused, its async error stays clear, and every rank can still
 * split it into a working one. */
static void checkRevoke(int r) {
  ncclComm_t d = NULL, again = NULL;
  NCCLCHECK(ncclCommSplit(comms[r], 0, r, &d, NULL));
  pthread_barrier_wait(&barrier);
  if (r == 0) {
    float x = 0;
    ncclResult_t async = ncclInternalError;
    NCCLCHECK(ncclCommRevoke(d, NCCL_REVOKE_DEFAULT));
    if (ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, d, streams[0]) != ncclInvalidUsage)
      failf("a revoked communicator refuses calls", 0, 0, 0, 1);
    NCCLCHECK(ncclCommGetAsyncError(d, &async));
    if (async != ncclSuccess) failf("revoked, not failed", 0, 0, async, 0);
  }
  pthread_barrier_wait(&barrier);
  NCCLCHECK(ncclCommSplit(d, 0, r, &again, NULL));
  int32_t* buf = (int32_t*)alloc(sizeof(int32_t));
  int32_t v = r;
  put(buf, &v, sizeof v);
  NCCLCHECK(ncclAllReduce(buf, buf, 1, ncclInt32, ncclSum, again, streams[r]));
  sync(r);
  get(&v, buf, sizeof v);
  if (v != nranks * (nranks - 1) / 2) failf("split of a revoked communicator", r, 0, v, 0);
  release(buf);
  NCCLCHECK(ncclCommDestroy(again));
  NCCLCHECK(ncclCommDestroy(d));
}

/* ncclCommAbort ends a call that waits for peers that never come: every
 * rank makes a copy of the communicator; rank 0 alone calls an allreduce
 * on it while a thread of its own aborts it; the call must fail, not hang. */
static ncclComm_t dups[MAXR];
static void* abortLater(void* arg) {
  (void)arg;
  struct timespec t = {0, 200 * 1000 * 1000};
  nanosleep(&t, NULL);
  if (ncclCommAbort(dups[0]) != ncclSuccess) failf("abort", 0, 0, 1, 0);
  return NULL;
}
static void checkAbort(int r) {
  NCCLCHECK(ncclCommSplit(comms[r], 0, r, &dups[r], NULL));
  pthread_barrier_wait(&barrier);
  if (r == 0) {
    pthread_t t;
    float* x = (float*)alloc(4 * sizeof(float));
    pthread_create(&t, NULL, abortLater, NULL);
    ncclResult_t e = ncclAllReduce(x, x, 4, ncclFloat, ncclSum, dups[0], streams[0]);
    if (e == ncclSuccess) {
      ncclResult_t async = ncclSuccess;
      sync(0);
      e = ncclCommGetAsyncError(dups[0], &async) == ncclSuccess ? async : ncclRemoteError;
    }
    if (e == ncclSuccess) failf("an aborted call fails", 0, 0, 0, 1);
    pthread_join(t, NULL);
    release(x);
  }
  pthread_barrier_wait(&barrier);
  if (r != 0) ncclCommDestroy(dups[r]); /* an aborted world: the answer does not matter */
}

static Bufs bufs[kChecks];

static void* rankMain(void* arg) {
  int r = (int)(intptr_t)arg;
  if (!host) CUDACHECK(cudaSetDevice(0));
  if (initMode == kThreads) NCCLCHECK(ncclCommInitRank(&comms[r], nranks, uid, r));
  pthread_barrier_wait(&barrier);
  for (int k = 0; k < kChecks; ++k) {
    const Check* c = &checks[k];
    if (!wanted(c)) continue;
    setup(c, &bufs[k], r);
    if (c->issue == issueRing) NCCLCHECK(ncclGroupStart());
    ncclResult_t e = c->issue(c, &bufs[k], r);
    if (c->issue == issueRing && e == ncclSuccess) e = ncclGroupEnd();
    if (e != ncclSuccess) {
      fprintf(stderr, "FAIL %s: rank %d: %s (%s)\n", c->name, r, ncclGetErrorString(e),
              ncclGetLastError(NULL));
      exit(1);
    }
    sync(r);
    finish(c, &bufs[k], r);
  }
  checkArgs(r);
  checkSplit(r);
  checkShrink(r);
  checkRevoke(r);
  if (nranks > 1) checkAbort(r);
  return NULL;
}

static void* splitMain(void* arg) {
  checkSplit((int)(intptr_t)arg);
  return NULL;
}

static void* shrinkMain(void* arg) {
  checkShrink((int)(intptr_t)arg);
  return NULL;
}

/* Every rank from this thread: each call of every rank in one group. */
static void runGrouped(void) {
  for (int k = 0; k < kChecks; ++k) {
    const Check* c = &checks[k];
    if (!wanted(c)) continue;
    for (int r = 0; r < nranks; ++r) setup(c, &bufs[k], r);
    NCCLCHECK(ncclGroupStart());
    for (int r = 0; r < nranks; ++r) {
      ncclResult_t e = c->issue(c, &bufs[k], r);
      if (e != ncclSuccess) {
        fprintf(stderr, "FAIL %s: rank %d: %s (%s)\n", c->name, r, ncclGetErrorString(e),
                ncclGetLastError(NULL));
        exit(1);
      }
    }
    NCCLCHECK(ncclGroupEnd());
    for (int r = 0; r < nranks; ++r) sync(r);
    for (int r = 0; r < nranks; ++r) finish(c, &bufs[k], r);
  }
  for (int r = 0; r < nranks; ++r) checkArgs(r);
  /* Splits need every rank at once: one thread each. */
  pthread_t t[MAXR];
  for (int r = 0; r < nranks; ++r) pthread_create(&t[r], NULL, splitMain, (void*)(intptr_t)r);
  for (int r = 0; r < nranks; ++r) pthread_join(t[r], NULL);
  for (int r = 0; r < nranks; ++r) pthread_create(&t[r], NULL, shrinkMain, (void*)(intptr_t)r);
  for (int r = 0; r < nranks; ++r) pthread_join(t[r], NULL);
}

static double seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* An allreduce of every rank captured into one CUDA graph (stream 0 forks
 * to the others and joins them), replayed with new inputs. */
static void runGraph(void) {
  float* in[MAXR];
  float* out[MAXR];
  float* h = (float*)malloc(C * 4);
  for (int r = 0; r < nranks; ++r) {
    in[r] = (float*)alloc(C * 4);
    out[r] = (float*)alloc(C * 4);
  }
  cudaEvent_t fork, join[MAXR];
  CUDACHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  for (int r = 0; r < nranks; ++r)
    CUDACHECK(cudaEventCreateWithFlags(&join[r], cudaEventDisableTiming));
  /* One eager call first, as applications warm up before capturing. */
  NCCLCHECK(ncclGroupStart());
  for (int r = 0; r < nranks; ++r)
    NCCLCHECK(ncclAllReduce(in[r], out[r], C, ncclFloat, ncclSum, comms[r], streams[r]));
  NCCLCHECK(ncclGroupEnd());
  for (int r = 0; r < nranks; ++r) sync(r);
  /* Eager calls, timed: what a replay is compared with. */
  const int timed = 20;
  double t0 = seconds();
  for (int k = 0; k < timed; ++k) {
    NCCLCHECK(ncclGroupStart());
    for (int r = 0; r < nranks; ++r)
      NCCLCHECK(ncclAllReduce(in[r], out[r], C, ncclFloat, ncclSum, comms[r], streams[r]));
    NCCLCHECK(ncclGroupEnd());
  }
  for (int r = 0; r < nranks; ++r) sync(r);
  double eager = (seconds() - t0) / timed;
  cudaGraph_t g;
  cudaGraphExec_t exec;
  CUDACHECK(cudaStreamBeginCapture(streams[0], cudaStreamCaptureModeGlobal));
  CUDACHECK(cudaEventRecord(fork, streams[0]));
  for (int r = 1; r < nranks; ++r) CUDACHECK(cudaStreamWaitEvent(streams[r], fork, 0));
  NCCLCHECK(ncclGroupStart());
  for (int r = 0; r < nranks; ++r)
    NCCLCHECK(ncclAllReduce(in[r], out[r], C, ncclFloat, ncclSum, comms[r], streams[r]));
  NCCLCHECK(ncclGroupEnd());
  for (int r = 1; r < nranks; ++r) {
    CUDACHECK(cudaEventRecord(join[r], streams[r]));
    CUDACHECK(cudaStreamWaitEvent(streams[0], join[r], 0));
  }
  CUDACHECK(cudaStreamEndCapture(streams[0], &g));
  CUDACHECK(cudaGraphInstantiate(&exec, g, 0));
  for (int rep = 0; rep < 100; ++rep) {
    for (int r = 0; r < nranks; ++r) {
      for (size_t i = 0; i < C; ++i) h[i] = (float)(rep * 100 + r * 10 + (int)(i % 9));
      put(in[r], h, C * 4);
    }
    CUDACHECK(cudaGraphLaunch(exec, streams[0]));
    CUDACHECK(cudaStreamSynchronize(streams[0]));
    for (int r = 0; r < nranks; ++r) {
      get(h, out[r], C * 4);
      for (size_t i = 0; i < C; ++i) {
        double want =
            (double)nranks * (rep * 100 + (int)(i % 9)) + 10.0 * nranks * (nranks - 1) / 2;
        if (h[i] != want) failf("graph replay", r, i, h[i], want);
      }
    }
  }
  t0 = seconds();
  for (int k = 0; k < timed; ++k) CUDACHECK(cudaGraphLaunch(exec, streams[0]));
  CUDACHECK(cudaStreamSynchronize(streams[0]));
  double replay = (seconds() - t0) / timed;
  printf("graph: %d ranks, %zu floats: eager %.1f us per call, replay %.1f us per call\n", nranks,
         (size_t)C, eager * 1e6, replay * 1e6);
  free(h);
  CUDACHECK(cudaGraphExecDestroy(exec));
  CUDACHECK(cudaGraphDestroy(g));
  for (int r = 0; r < nranks; ++r) {
    release(in[r]);
    release(out[r]);
  }
}

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--ranks") && i + 1 < argc) {
      nranks = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--init") && i + 1 < argc) {
      ++i;
      initMode = !strcmp(argv[i], "group") ? kGroup : !strcmp(argv[i], "all") ? kAll : kThreads;
    } else if (!strcmp(argv[i], "--count") && i + 1 < argc) {
      C = (size_t)atol(argv[++i]);
    } else if (!strcmp(argv[i], "--host")) {
      host = 1;
    } else if (!strcmp(argv[i], "--graph")) {
      graph = 1;
    } else if (!strcmp(argv[i], "--no-p2p")) {
      p2p = 0;
    } else {
      fprintf(stderr,
              "usage: %s [--ranks N] [--count C] [--init threads|group|all] [--host] [--graph] "
              "[--no-p2p]\n",
              argv[0]);
      return 2;
    }
  }
  if (nranks < 1 || nranks > MAXR || C < 1 || C > (1u << 26)) {
    fprintf(stderr, "--ranks must be 1..%d, --count 1..2^26\n", MAXR);
    return 2;
  }
  int version = 0;
  NCCLCHECK(ncclGetVersion(&version));
  if (!host) {
    int gpus = 0;
    if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus == 0) {
      printf("skipped: no GPU (pass --host for host ranks)\n");
      return 77;
    }
    CUDACHECK(cudaSetDevice(0));
    for (int r = 0; r < nranks; ++r)
      CUDACHECK(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking));
  }
  if (initMode == kAll) {
    int devs[MAXR] = {0}; /* every rank on GPU 0 */
    NCCLCHECK(ncclCommInitAll(comms, nranks, host ? NULL : devs));
  } else {
    NCCLCHECK(ncclGetUniqueId(&uid));
  }
  if (initMode == kGroup) {
    /* The inits and a first allreduce on the new communicators, one group:
     * the allreduce runs once the group's end has made them. */
    const Check* first = &checks[0];
    Bufs b;
    for (int r = 0; r < nranks; ++r) setup(first, &b, r);
    NCCLCHECK(ncclGroupStart());
    for (int r = 0; r < nranks; ++r) NCCLCHECK(ncclCommInitRank(&comms[r], nranks, uid, r));
    for (int r = 0; r < nranks; ++r) NCCLCHECK(first->issue(first, &b, r));
    NCCLCHECK(ncclGroupEnd());
    for (int r = 0; r < nranks; ++r) sync(r);
    for (int r = 0; r < nranks; ++r) finish(first, &b, r);
  }
  if (initMode == kThreads) {
    pthread_t t[MAXR];
    pthread_barrier_init(&barrier, NULL, (unsigned)nranks);
    for (int r = 0; r < nranks; ++r) pthread_create(&t[r], NULL, rankMain, (void*)(intptr_t)r);
    for (int r = 0; r < nranks; ++r) pthread_join(t[r], NULL);
    pthread_barrier_destroy(&barrier);
  } else {
    runGrouped();
  }
  if (graph && !host) runGraph();
  for (int r = 0; r < nranks; ++r) NCCLCHECK(ncclCommDestroy(comms[r]));
  if (failures) {
    printf("FAILED: %d mismatches (NCCL API %d, %d ranks)\n", failures, version, nranks);
    return 1;
  }
  printf("ok: every check passed (NCCL API %d, %d ranks, %s)\n", version, nranks,
         host ? "host buffers" : "GPU 0");
  return 0;
}
