/*
 * Chorus C API. Shaped like nccl.h: replace the `nccl` prefix with `chorus`
 * and an NCCL program compiles against it. Ranks are threads of one process
 * (or processes, hosts) on host memory, where the stream arguments must be
 * NULL; or, with a build that has CUDA, ranks on GPUs (chorusCommInitAll
 * with a devlist) on device memory, calls enqueued on their streams.
 *
 * Calls on host communicators are blocking: each rank's call returns when
 * that rank's part of the collective is done. Drive ranks either from one thread per
 * rank, or from one thread with chorusGroupStart/chorusGroupEnd around one
 * call per rank (as with NCCL on several GPUs).
 *
 * Every function returns a chorusResult_t; chorusGetLastError() says what
 * went wrong in words. No function throws or aborts on bad input.
 */
#ifndef CHORUS_CHORUS_H_
#define CHORUS_CHORUS_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CHORUS_MAJOR 0
#define CHORUS_MINOR 1
#define CHORUS_PATCH 0
/* As NCCL_VERSION_CODE: major * 10000 + minor * 100 + patch. */
#define CHORUS_VERSION_CODE (CHORUS_MAJOR * 10000 + CHORUS_MINOR * 100 + CHORUS_PATCH)

typedef struct chorusComm* chorusComm_t;

#define CHORUS_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[CHORUS_UNIQUE_ID_BYTES];
} chorusUniqueId;

/* Same values as ncclResult_t; chorusTimeout is Chorus's own. */
typedef enum {
  chorusSuccess = 0,
  chorusUnhandledCudaError = 1,
  chorusSystemError = 2,
  chorusInternalError = 3,
  chorusInvalidArgument = 4,
  chorusInvalidUsage = 5,
  chorusRemoteError = 6,
  chorusInProgress = 7,
  chorusTimeout = 8,
  chorusNumResults = 9
} chorusResult_t;

/* Same values as ncclRedOp_t. */
typedef enum {
  chorusSum = 0,
  chorusProd = 1,
  chorusMax = 2,
  chorusMin = 3,
  chorusAvg = 4,
  chorusNumOps = 5,
  /* Makes every int a valid value, so a bad one is reported, not undefined. */
  chorusRedOpMaxEnum = 0x7fffffff
} chorusRedOp_t;

/* Same values as ncclDataType_t. */
typedef enum {
  chorusInt8 = 0,
  chorusChar = 0,
  chorusUint8 = 1,
  chorusInt32 = 2,
  chorusInt = 2,
  chorusUint32 = 3,
  chorusInt64 = 4,
  chorusUint64 = 5,
  chorusFloat16 = 6,
  chorusHalf = 6,
  chorusFloat32 = 7,
  chorusFloat = 7,
  chorusFloat64 = 8,
  chorusDouble = 8,
  chorusBfloat16 = 9,
  chorusFloat8e4m3 = 10,
  chorusFloat8e5m2 = 11,
  chorusNumTypes = 12,
  chorusDataTypeMaxEnum = 0x7fffffff /* as chorusRedOpMaxEnum */
} chorusDataType_t;

/* A cudaStream_t on GPU communicators (NULL: the legacy default stream);
 * NULL on host communicators. */
typedef void* chorusStream_t;

/* An algorithm file loaded with chorusLoadAlgo. */
typedef int chorusAlgoHandle_t;

chorusResult_t chorusGetVersion(int* version);
const char* chorusGetErrorString(chorusResult_t result);
/* The last error of the calling thread, in words ("" if none). `comm` may be
 * NULL. The string stays valid until the thread's next Chorus call. */
const char* chorusGetLastError(chorusComm_t comm);

/* Communicators. */
/* Starts a root (a thread of this process, listening on an interface's
 * address; CHORUS_SOCKET_IFNAME picks one) that the ranks of one
 * communicator meet at. Pass the id's bytes to every rank (threads of this
 * process, other processes, other hosts). */
chorusResult_t chorusGetUniqueId(chorusUniqueId* uniqueId);
/* Collective over `nranks` callers with the same id: rank r of nranks.
 * Ranks that all live in one process become an in-process world; else each
 * rank is a process-style rank (shared memory on one host, TCP between
 * hosts). An id whose text is "chorus-tcp:HOST:PORT:SECRET" skips the root:
 * rank 0 listens on PORT itself. Blocks until all joined (CHORUS_TIMEOUT_S).
 * Inside a group it returns at once with the handle, and the ranks meet at
 * chorusGroupEnd (so one thread may init every rank, as with NCCL); until
 * then only collectives and send/recv of the same group may use it. */
chorusResult_t chorusCommInitRank(chorusComm_t* comm, int nranks, chorusUniqueId commId, int rank);
/* chorusCommInitRank for a rank on GPU `device` (a build with CUDA): ranks
 * that all live in this process form a GPU communicator as chorusCommInitAll
 * with a devlist does (several ranks may share one GPU); ranks in several
 * processes are GPU ranks whose calls are staged through host memory
 * (docs/cuda.md). Either way collectives take device buffers and a stream.
 * device < 0 is chorusCommInitRank. */
chorusResult_t chorusCommInitRankDevice(chorusComm_t* comm, int nranks, chorusUniqueId commId,
                                        int rank, int device);
/* This process is one rank of a job started by `chorus launch`, torchrun or
 * mpirun: rank, size and root address come from the environment (CHORUS_RANK,
 * CHORUS_WORLD_SIZE, CHORUS_ROOT, CHORUS_SECRET; or RANK, WORLD_SIZE,
 * MASTER_ADDR, MASTER_PORT; or OMPI_COMM_WORLD_RANK/SIZE with CHORUS_ROOT or
 * CHORUS_ROOT_FILE). Ranks on one host talk through shared memory. */
chorusResult_t chorusCommInitFromEnv(chorusComm_t* comm);
/* `ndev` ranks of this process; comm[i] is rank i. `devlist` NULL: ranks on
 * the host, buffers in host memory. `devlist` non-NULL (a build with CUDA):
 * rank i on GPU devlist[i] (several ranks may share one GPU), buffers in
 * device memory, each collective enqueued on the stream passed to it and
 * returning at once, as in NCCL; call a collective for every rank (from
 * their threads, or from one thread between chorusGroupStart/End). A send
 * and its receive become a copy on the receiver's stream. */
chorusResult_t chorusCommInitAll(chorusComm_t* comm, int ndev, const int* devlist);
chorusResult_t chorusCommDestroy(chorusComm_t comm);
/* Stops every pending call of the communicator's ranks (they return
 * chorusRemoteError), then destroys `comm`. */
chorusResult_t chorusCommAbort(chorusComm_t comm);
/* As chorusCommAbort, but `comm` stays: its pending and later calls fail,
 * and it may still be split, shrunk (ranks of one process) or destroyed. */
chorusResult_t chorusCommRevoke(chorusComm_t comm);
/* An error that ended the communicator (a timeout, an abort); when there is
 * one, chorusGetLastError says what it was. */
chorusResult_t chorusCommGetAsyncError(chorusComm_t comm, chorusResult_t* asyncError);
chorusResult_t chorusCommCount(const chorusComm_t comm, int* count);
chorusResult_t chorusCommUserRank(const chorusComm_t comm, int* rank);
/* The rank's CUDA device; -1 (cudaCpuDeviceId) for a rank on the host. */
chorusResult_t chorusCommCuDevice(const chorusComm_t comm, int* device);
/* Waits until every call this rank enqueued has finished (GPU
 * communicators; host calls are done when they return). */
chorusResult_t chorusCommFinalize(chorusComm_t comm);

#define CHORUS_SPLIT_NOCOLOR (-1)
/* Collective over every rank of `comm`: ranks passing the same color form a
 * new communicator, ordered by key (ties: by rank in `comm`). A rank
 * passing CHORUS_SPLIT_NOCOLOR joins none and gets NULL. The new
 * communicators keep the parent's kind (threads, processes, GPU ranks on
 * the same devices). */
chorusResult_t chorusCommSplit(chorusComm_t comm, int color, int key, chorusComm_t* newcomm);
/* A communicator of `comm`'s ranks but the `nexclude` listed ones, which
 * may be dead: only the others call, and get ranks in their old order.
 * abortFirst != 0 ends the parent's calls first (ranks of one process only:
 * across processes the new id travels over the parent's links). */
chorusResult_t chorusCommShrink(chorusComm_t comm, const int* excludeRanks, int nexclude,
                                int abortFirst, chorusComm_t* newcomm);

/* Collectives, as in NCCL. Counts follow NCCL: allgather takes the send
 * count, reducescatter the receive count, alltoall the count per peer. */
chorusResult_t chorusAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                               chorusDataType_t datatype, chorusRedOp_t op, chorusComm_t comm,
                               chorusStream_t stream);
chorusResult_t chorusBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                               chorusDataType_t datatype, int root, chorusComm_t comm,
                               chorusStream_t stream);
chorusResult_t chorusReduce(const void* sendbuff, void* recvbuff, size_t count,
                            chorusDataType_t datatype, chorusRedOp_t op, int root,
                            chorusComm_t comm, chorusStream_t stream);
chorusResult_t chorusAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                               chorusDataType_t datatype, chorusComm_t comm, chorusStream_t stream);
chorusResult_t chorusReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                   chorusDataType_t datatype, chorusRedOp_t op, chorusComm_t comm,
                                   chorusStream_t stream);
chorusResult_t chorusAllToAll(const void* sendbuff, void* recvbuff, size_t count,
                              chorusDataType_t datatype, chorusComm_t comm, chorusStream_t stream);
/* Gather: `count` elements of every rank land at the root's
 * recvbuff + rank * count. Scatter: the root's sendbuff + r * count goes to
 * rank r. As with NCCL, a buffer only the root uses (gather's and reduce's
 * recvbuff, scatter's and broadcast's sendbuff) may be NULL elsewhere on
 * host ranks (GPU communicators of one process need it on every rank). */
chorusResult_t chorusGather(const void* sendbuff, void* recvbuff, size_t count,
                            chorusDataType_t datatype, int root, chorusComm_t comm,
                            chorusStream_t stream);
chorusResult_t chorusScatter(const void* sendbuff, void* recvbuff, size_t count,
                             chorusDataType_t datatype, int root, chorusComm_t comm,
                             chorusStream_t stream);

/* Point to point. A send completes when the matching receive (same peers,
 * FIFO order) has taken the data; put both sides of an exchange in a group. */
chorusResult_t chorusSend(const void* sendbuff, size_t count, chorusDataType_t datatype, int peer,
                          chorusComm_t comm, chorusStream_t stream);
chorusResult_t chorusRecv(void* recvbuff, size_t count, chorusDataType_t datatype, int peer,
                          chorusComm_t comm, chorusStream_t stream);

/* Buffers other processes on this host can read in place (as ncclMemAlloc
 * is for GPUs): a collective of processes whose buffers come from here moves
 * every message with one copy, straight from the sender's buffer (peers
 * map it once), where other memory costs a copy into shared memory or a
 * system call per message. Host communicators only; zeroed, page-aligned.
 * chorusMemFree takes only what chorusMemAlloc returned. */
chorusResult_t chorusMemAlloc(void** ptr, size_t size);
chorusResult_t chorusMemFree(void* ptr);

/* Groups: calls between start and end are issued together at the end; the
 * end returns when all of them are done. Groups nest. If a call was refused
 * while grouping, the end runs none of the others and returns that error.
 * Communicators initialized in the group are made at its end either way. */
chorusResult_t chorusGroupStart(void);
chorusResult_t chorusGroupEnd(void);
/* Ends the group as chorusGroupEnd does (an inner one only closes), but runs
 * none of its calls: they are dropped. Its communicators are still made,
 * since their peers meet them. For a layer above that refuses a call of its
 * own while grouping (the NCCL shim's checks), or simulates the group. */
chorusResult_t chorusGroupCancel(void);

/* Algorithm files. chorusLoadAlgo reads and verifies a file (MSCCL XML or
 * Chorus JSON) and refuses one the verifier rejects; chorusRunAlgo runs it
 * explicitly, at any count its chunking allows (the collective is the
 * file's; counts follow the collective's convention). `rank` is accepted for
 * MSCCL compatibility and ignored. */
chorusResult_t chorusLoadAlgo(const char* algoFilePath, chorusAlgoHandle_t* handle, int rank);
chorusResult_t chorusRunAlgo(const void* sendbuff, void* recvbuff, size_t count,
                             chorusDataType_t datatype, chorusRedOp_t op, int root,
                             chorusAlgoHandle_t handle, chorusComm_t comm, chorusStream_t stream);
chorusResult_t chorusUnloadAlgo(chorusAlgoHandle_t handle);
/* A built-in algorithm by name (as `chorus perf --algo NAME`: ring_allreduce,
 * halving_doubling_allreduce, chain_allreduce, ring_allgather,
 * direct_allgather, ring_reducescatter, pairwise_alltoall, direct_alltoall,
 * chain_broadcast, chain_reduce, direct_gather, direct_scatter) for
 * `nranks` ranks, rooted at `root` where the collective has one. */
chorusResult_t chorusLoadBuiltinAlgo(const char* name, int nranks, int root,
                                     chorusAlgoHandle_t* handle);
/* Adds a file to automatic selection (every communicator, from the next
 * call on), after the files from CHORUS_ALGO_DIR, MSCCL_ALGO_DIR and
 * MSCCL_XML_FILES. */
chorusResult_t chorusRegisterAlgoFile(const char* algoFilePath);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CHORUS_CHORUS_H_ */
