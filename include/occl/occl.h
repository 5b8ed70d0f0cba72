/*
 * occl: a deadlock-free collective communication runtime.
 *
 * Collectives are *registered* once under a user-chosen 64-bit collId and then *submitted* any
 * number of times, in any order on any rank, each submission with a callback. A daemon (worker
 * threads on the host backend, a persistent kernel on the CUDA backend) runs them, preempting a
 * collective that waits on a peer for too long, so no submission order can deadlock.
 *
 * Conventions follow NCCL where they exist: counts are in elements, `count` of AllGather is the
 * per-rank send count, of ReduceScatter the per-rank receive count, of AllToAll the count sent to
 * each peer. In-place means sendbuf == recvbuf (AllGather: sendbuf == recvbuf + rank*count;
 * ReduceScatter: recvbuf == sendbuf + rank*count).
 *
 * Every function returns an occlResult_t. On failure, occlGetLastError(comm) returns a message
 * naming the argument and what was expected. Nothing here blocks forever: waits are bounded by
 * the timeouts of the config.
 */
#ifndef OCCL_OCCL_H_
#define OCCL_OCCL_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define OCCL_MAJOR 0
#define OCCL_MINOR 1
#define OCCL_PATCH 0
#define OCCL_VERSION_CODE (OCCL_MAJOR * 10000 + OCCL_MINOR * 100 + OCCL_PATCH)

typedef enum {
  occlSuccess = 0,
  occlUnhandledCudaError = 1, /* a CUDA call failed */
  occlSystemError = 2,        /* an OS call failed (socket, shm, thread) */
  occlInternalError = 3,      /* a bug in occl */
  occlInvalidArgument = 4,    /* an argument is out of range or NULL */
  occlInvalidUsage = 5,       /* a valid call at the wrong time, or ranks disagree */
  occlRemoteError = 6,        /* a peer failed or reported an error */
  occlInProgress = 7,         /* an operation has not finished yet */
  occlTimeout = 8,            /* a collective or an init exceeded its timeout */
  occlAborted = 9,            /* the communicator was aborted */
  occlNumResults = 10
} occlResult_t;

/* Numbering as NCCL's, so code ported from NCCL keeps its constants. */
typedef enum {
  occlInt8 = 0,
  occlUint8 = 1,
  occlInt32 = 2,
  occlUint32 = 3,
  occlInt64 = 4,
  occlUint64 = 5,
  occlFloat16 = 6,
  occlFloat32 = 7,
  occlFloat64 = 8,
  occlBfloat16 = 9,
  occlFloat8e4m3 = 10, /* OCP e4m3 (torch float8_e4m3fn): max 448, no infinities */
  occlFloat8e5m2 = 11, /* OCP e5m2 (torch float8_e5m2): max 57344 */
  occlNumTypes = 12
} occlDataType_t;

/* occlMaxRedOp widens the enum to every int, as NCCL's ncclMaxRedOp does: the ops that
 * occlRedOpCreatePreMulSum returns (occlNumOps and up) are valid occlRedOp_t values. */
typedef enum {
  occlSum = 0,
  occlProd = 1,
  occlMax = 2,
  occlMin = 3,
  occlAvg = 4,
  occlNumOps = 5,
  occlMaxRedOp = 0x7fffffff
} occlRedOp_t;

/* Where a PreMulSum op's scalar lives (occlRedOpCreatePreMulSum), as NCCL's. */
typedef enum { occlScalarDevice = 0, occlScalarHostImmediate = 1 } occlScalarResidence_t;

typedef enum {
  occlCollAllReduce = 0,
  occlCollAllGather = 1,
  occlCollReduceScatter = 2,
  occlCollReduce = 3,
  occlCollBroadcast = 4,
  occlCollAllToAll = 5,
  occlCollSend = 6, /* point-to-point: `root` names the peer */
  occlCollRecv = 7,
  occlCollGather = 8,  /* count elements from every rank into the root's recvbuf, rank r's at r*count */
  occlCollScatter = 9, /* the root's sendbuf, count elements to each rank, rank r's from r*count */
  occlNumCollTypes = 10
} occlCollType_t;

typedef enum {
  occlBackendAuto = 0,
  occlBackendHost = 1,
  occlBackendCuda = 2,
  occlBackendSimt = 3 /* the CUDA daemon's device code on host threads (emulated blocks; for tests) */
} occlBackend_t;

typedef enum {
  occlOrderFifo = 0,     /* the task queue in arrival order */
  occlOrderPriority = 1, /* higher occlCollDesc_t.priority first, arrival order among equals */
  occlOrderAgreed = 2    /* the same order on every rank whatever the submission order: earlier
                            submissions of a collective (1st, 2nd, ...) first, then lower collId */
} occlOrderPolicy_t;

typedef enum {
  occlSpinPolicyStickiness = 0, /* paper §3.2: threshold falls with queue position, rises on progress */
  occlSpinPolicyFixed = 1       /* every collective gets spinThresholdMax; no adjustment */
} occlSpinPolicy_t;

typedef enum {
  occlTransportAuto = 0, /* device memory (CUDA IPC) or shared memory between processes of one host, the
                            network (UCX) between hosts */
  occlTransportNet = 1,  /* the network between any two processes, also on one host */
  occlTransportShm = 2   /* shared memory between processes of one host, also where device memory could
                            carry it; the network between hosts */
} occlTransport_t;

/* The longest timeout any field or argument takes: 100 years, so that a deadline in nanoseconds
 * from now still fits an int64_t. */
#define OCCL_MAX_TIMEOUT_MS 3153600000000LL

/*
 * Runtime configuration. Fill it with occlConfigInit(), which applies the documented OCCL_*
 * environment variables (docs/configuration.md) over the built-in defaults, then change fields.
 * The scheduling knobs (order and spin policies, thresholds, connector geometry) must be
 * identical on all ranks; connector geometry is checked, a mismatch fails the collective.
 */
typedef struct {
  size_t structSize;        /* sizeof(occlConfig_t), set by occlConfigInit */
  int backend;              /* occlBackend_t */
  int daemonBlocks;         /* daemon blocks (threads / CUDA blocks) per rank, 1..64; 0 = auto:
                               1 thread on the host, up to 16 blocks on a GPU */
  int threadsPerBlock;      /* CUDA backend: threads of a daemon block */
  int sqDepth;              /* submission queue entries, power of two */
  int cqDepth;              /* completion ring slots per daemon block, power of two */
  int taskQueueDepth;       /* collectives one daemon block juggles at once */
  int maxInflightPerColl;   /* submissions of one collId in flight at once */
  int connectorSlots;       /* FIFO slots of a connector, 2..1024; a program that needs more gets more */
  size_t connectorSlotBytes; /* bytes of one FIFO slot (one tile), multiple of 64; 0 = auto:
                                128 KiB within a host, 1 MiB across hosts or with any CUDA
                                rank. A collective whose
                                chunks are smaller gets slots of its chunk (in 64-byte lines) */
  int orderPolicy;          /* occlOrderPolicy_t */
  int spinPolicy;           /* occlSpinPolicy_t */
  uint32_t spinThresholdMax; /* spin rounds for the front of the task queue */
  uint32_t spinThresholdMin; /* floor for collectives further back */
  uint32_t spinThresholdStep; /* decrement per queue position */
  uint32_t spinThresholdBoost; /* added after a primitive of the collective succeeds */
  uint32_t priorityPollInterval; /* priority order: SQ polled every this many task tries */
  int idleQuitUs;           /* a daemon block with no progress and no SQE for this long quits (parks) */
  int64_t collTimeoutMs;    /* a submission not complete after this fails with occlTimeout; 0 = never;
                               at most OCCL_MAX_TIMEOUT_MS */
  int64_t initTimeoutMs;    /* bootstrap and connection set-up bound, 1..OCCL_MAX_TIMEOUT_MS */
  int forcePreempt;         /* test knob: preempt at every wait (threshold 1) */
  int disablePreemption;    /* test knob: never preempt (shows the deadlock occl removes) */
  int simtLanes;            /* simt backend: threads (lanes) of an emulated daemon block, 1..64 */
  int simtSmSlots;          /* simt backend: daemon blocks its emulated device holds at once; 0 = no limit */
  uint32_t simtJitterSeed;  /* simt backend: nonzero delays non-leader lanes at random (seeded) */
  int transport;            /* occlTransport_t: how ranks of different processes connect */
  int timelineDepth;        /* records of finished submissions each daemon block keeps for
                               occlCommGetTimeline, 0..65536; 0 = none (the default: no clock reads) */
} occlConfig_t;

occlResult_t occlConfigInit(occlConfig_t* config);
/* Sets the field `field`, named as above ("sqDepth", "collTimeoutMs", "transport"), from `value`
 * written as its OCCL_* variable takes it (docs/configuration.md): a decimal integer, 0 or 1 for
 * the test knobs, a word of the choices or the enum's value for backend, orderPolicy, spinPolicy
 * and transport. The one table behind the environment variables, so a binding (Python's
 * Comm(**config)) needs no list of its own. occlInvalidArgument names an unknown field or a bad
 * value; the config is then unchanged. Ranges are checked by the init call, as for any field. */
occlResult_t occlConfigSetField(occlConfig_t* config, const char* field, const char* value);

#define OCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[OCCL_UNIQUE_ID_BYTES];
} occlUniqueId;

typedef struct occlComm* occlComm_t;

/* Describes one collective at registration. Initialise with occlCollDescInit(). */
typedef struct {
  int type;              /* occlCollType_t */
  size_t count;          /* elements, with NCCL's per-collective meaning (see top of file) */
  int datatype;          /* occlDataType_t */
  int op;                /* occlRedOp_t, for reducing collectives */
  int root;              /* Reduce/Broadcast root; Send/Recv peer */
  int priority;          /* higher runs first under occlOrderPriority */
  const char* algorithm; /* NULL: built-in (an AllReduce of a few KiB per peer goes "direct",
                            one hop; a larger one "peer", using the other ranks' buffers, on
                            2..16 ranks whose every peer is "in-process" (occlCommInitAll on
                            the host backend), or "in-process" or "shm" with sharedBuffers,
                            and one block; else "ring"; an AllToAll on one block whose every
                            peer is "in-process" goes "peer", taking each chunk straight from
                            its sender's sendbuf, else "direct"); "ring": built-in, never direct
                            (for AllReduce) nor peer; else an MSCCL-IR file path or loaded name */
  int nBlocks;           /* daemon blocks (channels) to use; 0 = the algorithm's default */
  int sharedBuffers;     /* 1: every submission's sendbuf and recvbuf lie in memory from
                            occlMemAlloc (occlSubmit checks), so ranks that are processes of
                            one host ("shm" peers) may run "peer" too, as threads do. Host
                            backend only; every rank must set the same. 0 (default): any
                            memory */
  int variableCount;     /* 1: `count` is a maximum, and each submission says its own count up to
                            it (occlSubmitCount, occlSubmission_t::count); the connectors keep the
                            maximum's size. Every rank must set the same, and pass the same count
                            for the same submission (checked: see occlSubmitCount). 0 (default):
                            every submission has `count` */
  int vectorCounts;      /* 1: the v-collective of `type` (MPI's AllToAllv, AllGatherv,
                            Reduce_scatter with displacements, Gatherv, Scatterv): each submission
                            gives every rank's block its own count and displacement (occlSubmitV),
                            and `count` is the most elements of any one block. AllToAll, AllGather,
                            ReduceScatter, Gather and Scatter, built-in algorithm only. Every rank
                            must set the same. 0 (default): none */
} occlCollDesc_t;

occlResult_t occlCollDescInit(occlCollDesc_t* desc);

typedef void (*occlCallback_t)(uint64_t collId, occlResult_t status, void* arg);

/*
 * Counters of one registered collective on this rank. Counts are summed over the daemon blocks
 * that run a part of it; the two times are summed over submissions and averaged over those
 * blocks, each block measuring on its own clock.
 */
typedef struct {
  uint64_t submissions;
  uint64_t completions;
  uint64_t preemptions;     /* tries that ended because a wait passed its threshold */
  uint64_t contextLoads;    /* tries: the preemptions, plus one per part per completion */
  uint64_t contextSaves;    /* lazy: only preemptions whose try moved the context */
  /* From the moment a daemon block took the submission from the submission queue to that
   * block's first try of it. Time the entry spent in the queue before a block polled it (the
   * daemon busy with a long try, or parked and waking up) is not included. */
  uint64_t queueWaitNs;
  /* From that first try to successful completion, time spent preempted included. */
  uint64_t executionNs;
  /* What the registration costs this rank: the FIFO bytes of its ends of the collective's
   * connectors, the most slots one of them has (config.connectorSlots, or more where the
   * program needs more: an MSCCL-IR program that sends k chunks on a connection before their
   * receiver takes one gets k), and the scratch bytes its program uses. */
  uint64_t connectorBytes;
  uint64_t scratchBytes;
  uint32_t connectorSlots;
  /* The parts (program threadblocks; NCCL's channels) the collective runs in on this rank: its
   * desc.nBlocks, or the number chosen for it (docs/configuration.md, daemonBlocks). */
  uint32_t parts;
} occlCollStats_t;

const char* occlGetErrorString(occlResult_t result);
/* The last error message of `comm`, or of the calling thread when comm is NULL. Never NULL. A
 * submission that completes with an error sets it too (naming the collId and the cause) before
 * its callback fires. */
const char* occlGetLastError(occlComm_t comm);
occlResult_t occlGetVersion(int* version);

/* Bootstrap: rank 0 calls occlGetUniqueId and ships the id to the others (any channel).
 * occlCommInitRank and occlCommInitFromEnv run the daemon on CUDA device (local rank % device
 * count) when the build has CUDA, a device is present and config.backend is auto or cuda. */
occlResult_t occlGetUniqueId(occlUniqueId* uniqueId);
occlResult_t occlCommInitRank(occlComm_t* comm, int nranks, occlUniqueId commId, int rank,
                              const occlConfig_t* config);
/* Rank, size and rendezvous address from the launcher's environment: OMPI_COMM_WORLD_RANK/SIZE
 * (mpirun) or RANK/WORLD_SIZE (torchrun), address from MASTER_ADDR/MASTER_PORT or OCCL_COMM_ID. */
occlResult_t occlCommInitFromEnv(occlComm_t* comm, const occlConfig_t* config);
/* `ndev` ranks in this process (ranks as threads). devlist: CUDA devices, duplicates allowed;
 * NULL for host ranks. */
occlResult_t occlCommInitAll(occlComm_t* comms, int ndev, const int* devlist, const occlConfig_t* config);

/* As ncclCommSplit: every rank of `comm` calls it; the ranks that pass one `color` (>= 0) form a
 * new communicator, ranked by `key` and then by their rank in `comm`. OCCL_SPLIT_NOCOLOR takes
 * part and gets *newcomm = NULL. config NULL inherits the parent's config (as it was given, before
 * occl resolved its automatic fields); a config may not move the child to another backend: a
 * child runs where its parent does (same device). No new rendezvous: the ranks meet through the
 * parent (ranks of occlCommInitAll: each calls it from its own thread). Parent and children are
 * independent communicators: their collectives may be submitted in any order, interleaved, and
 * either may be destroyed first. A bad argument on one rank fails the call on every rank. */
#define OCCL_SPLIT_NOCOLOR (-1)
occlResult_t occlCommSplit(occlComm_t comm, int color, int key, occlComm_t* newcomm, const occlConfig_t* config);

/* As ncclCommRevoke: fails every pending submission of this rank (callbacks fire with occlAborted,
 * "revoked"), poisons its connectors so that its peers fail theirs at once instead of at their
 * timeout, and stops its daemon, without waiting for anyone and without freeing the communicator:
 * afterwards only occlCommShrink, occlCommDestroy and the queries are useful (submissions are
 * refused with occlInvalidUsage; occlCommFinalize returns at once). revokeFlags: OCCL_REVOKE_DEFAULT. */
#define OCCL_REVOKE_DEFAULT 0
occlResult_t occlCommRevoke(occlComm_t comm, int revokeFlags);

/* As ncclCommShrink: every rank of `comm` except the excluded ones calls it with the same list, and
 * gets a communicator of the others, in their order. It works after an excluded rank died or
 * hangs, the bootstrap root included (processes meet at a rendezvous made when `comm` was, in the
 * lowest survivor's process; the threads of one occlCommInitAll each call it from their own
 * thread). OCCL_SHRINK_DEFAULT refuses a `comm`
 * with pending submissions; OCCL_SHRINK_ABORT revokes it first (its pending submissions fail).
 * The new communicator keeps, under the same collIds, the registered AllReduces on the automatic
 * algorithm or "ring": a training loop goes on with occlSubmit. Everything else (the other kinds,
 * which scale with or name ranks, and MSCCL-IR programs) must be registered again. config NULL
 * inherits the parent's. Destroy `comm` afterwards. */
#define OCCL_SHRINK_DEFAULT 0
#define OCCL_SHRINK_ABORT 1
occlResult_t occlCommShrink(occlComm_t comm, const int* excludeRanksList, int excludeRanksCount, occlComm_t* newcomm,
                            const occlConfig_t* config, int shrinkFlags);

/* Waits (bounded by collTimeoutMs) for every submitted collective to complete, then stops. With
 * ranks in several processes it is collective: it returns once every rank has called it (bounded
 * by initTimeoutMs), so a rank may destroy its communicator right after without taking away data
 * a slower peer has yet to receive.
 * Threads: the calls on a communicator may come from any threads at once, except Finalize, Destroy
 * and Abort, which must not overlap another thread's call on it (nor each other), as with NCCL: a
 * thread still inside occlSubmit or occlCommWaitAll when Destroy or Abort frees the communicator
 * would use freed memory. A callback's occlSubmit while Finalize runs is either accepted (its
 * callback fires before Finalize returns) or refused with occlInvalidUsage. */
occlResult_t occlCommFinalize(occlComm_t comm);
occlResult_t occlCommDestroy(occlComm_t comm);
/* Fails every pending submission with occlAborted (their callbacks fire once), stops without
 * waiting for peers, and frees the communicator, as ncclCommAbort does: `comm` is invalid
 * afterwards. Call it instead of occlCommDestroy, never before it (that would free it twice).
 * Not from a callback (occlInvalidUsage). */
occlResult_t occlCommAbort(occlComm_t comm);
occlResult_t occlCommGetAsyncError(occlComm_t comm, occlResult_t* asyncError);
occlResult_t occlCommCount(occlComm_t comm, int* count);
occlResult_t occlCommUserRank(occlComm_t comm, int* rank);
/* The transport that carries this rank's connectors to rank `peer` (itself included): "in-process"
 * (ranks that are threads of one process), "shm" (processes of one host), "net" (the NET
 * connector over UCX: another host, or OCCL_TRANSPORT=net), or on CUDA ranks "cuda-in-process",
 * "cuda-ipc" (device memory of another process: one GPU, or GPUs that reach each other by peer
 * access) and "cuda-shm" (pinned shared memory otherwise, or OCCL_TRANSPORT=shm); "simt-ipc"
 * between simt ranks of two processes. A static string; NCCL prints the same with
 * NCCL_DEBUG=INFO ("via P2P/IPC"). */
occlResult_t occlCommPeerTransport(occlComm_t comm, int peer, const char** transport);
/* The configuration this rank's communicator runs with: what its init call was given, with the
 * "auto" fields resolved (connectorSlotBytes = 0 becomes the size the communicator chose). */
occlResult_t occlCommGetConfig(occlComm_t comm, occlConfig_t* config);

occlResult_t occlCollRegister(occlComm_t comm, uint64_t collId, const occlCollDesc_t* desc);
occlResult_t occlCollDeregister(occlComm_t comm, uint64_t collId);
/*
 * A PreMulSum op, as NCCL's ncclRedOpCreatePreMulSum: a reduction registered with *op (in
 * desc.op; its desc.datatype must be `datatype`) sums every rank's input multiplied by that rank's
 * scalar, each product rounded to the datatype first. Ranks may pass different scalars.
 * occlScalarHostImmediate reads *scalar now; occlScalarDevice keeps the address and reads the
 * scalar whenever a submission's step reads this rank's input, so a change between submissions
 * takes effect (the address must be readable by the daemon: host memory on the host backend, the
 * communicator's device memory on CUDA). A registration keeps the op's scalar or address:
 * occlRedOpDestroy afterwards changes nothing registered. AllReduce with PreMulSum never takes the
 * peer algorithm, whose fold reads the other ranks' inputs without their scalars.
 */
occlResult_t occlRedOpCreatePreMulSum(occlRedOp_t* op, void* scalar, occlDataType_t datatype,
                                      occlScalarResidence_t residence, occlComm_t comm);
occlResult_t occlRedOpDestroy(occlRedOp_t op, occlComm_t comm);
/*
 * Loads and validates the MSCCL-IR file at `path` under `name` (replacing what the name held),
 * for occlCollDesc_t.algorithm on this communicator. A registration may also name a file path
 * directly. A collective registered with an MSCCL-IR program runs it where MSCCL would: same
 * collective and rank count (else registration fails), a count whose bytes (count x datatype
 * size x nranks for allgather/alltoall/reduce_scatter) lie in [minBytes, maxBytes] and split into
 * whole chunks, and a submission whose placement the program declares (inplace, outofplace);
 * every other submission runs the built-in algorithm. Every rank must submit a given run with the
 * same placement, as with MSCCL. occlCollGetAlgorithm says what runs.
 */
occlResult_t occlAlgorithmLoad(occlComm_t comm, const char* name, const char* path);
/* The name of the algorithm submissions of collId run in place (inPlace != 0) or out of place:
 * the MSCCL-IR program's name, or the built-in one's ("ring", "chain", "direct", "peer",
 * "p2p"). The string stays valid while collId is registered. */
occlResult_t occlCollGetAlgorithm(occlComm_t comm, uint64_t collId, int inPlace, const char** algorithm);
/* A collective registered with desc.variableCount and no MSCCL-IR program may run its small
 * submissions, those of at most *maxCount elements, with another built-in algorithm than its
 * maximum's (the small-message form: on a GPU fewer parts, on the host "direct" where the maximum
 * takes "peer"), on the same connectors. Its name, or *maxCount = 0 and *algorithm = NULL where
 * every submission runs occlCollGetAlgorithm's. The string stays valid while collId is registered.
 * Submissions in flight stay ordered on their buffers: one on the other side of *maxCount from
 * the submission before it starts once the collective's earlier submissions have completed. */
occlResult_t occlCollGetSmallForm(occlComm_t comm, uint64_t collId, uint64_t* maxCount, const char** algorithm);

/*
 * Submits one run of collId. The callback fires exactly once, with the completion status, on the
 * communicator's poller thread or on a thread blocked in occlCommWaitAll on it (which does the
 * poller's work while it waits); it may submit again but must not block, and must not throw (a C++
 * exception that reaches occl ends the process through std::terminate; occl.hpp's Comm::submit
 * catches its std::function's and rethrows them from waitAll). Buffers must stay valid until
 * then. Submissions of one collId run in submission order. On a CUDA rank the buffers must be
 * memory its device can address (device, mapped pinned or managed memory), and their contents
 * ready when occlSubmit is called: synchronise the work that produces them first, or submit with
 * occlSubmitOnStream.
 */
occlResult_t occlSubmit(occlComm_t comm, uint64_t collId, const void* sendbuf, void* recvbuf,
                        occlCallback_t callback, void* arg);
/*
 * A submission of a collective registered with desc.variableCount, with `count` elements (NCCL's
 * per-collective meaning, as desc.count), 0..desc.count; the buffers need only hold what `count`
 * needs. Otherwise as occlSubmit, which submits the registered count. Every rank must pass the same
 * count for the same submission (the k-th of this collId): a rank that receives data from a rank
 * that passed another count fails the submission with occlInvalidUsage, and a message naming both
 * counts, before it reads any of it; the failure reaches the other ranks as a registration
 * mismatch does, and the collective stays failed (register it again). A collective without
 * desc.variableCount takes only its registered count. OCCL_COUNT_REGISTERED: the registered count.
 */
#define OCCL_COUNT_REGISTERED ((size_t)-1)
occlResult_t occlSubmitCount(occlComm_t comm, uint64_t collId, size_t count, const void* sendbuf, void* recvbuf,
                             occlCallback_t callback, void* arg);
/*
 * A submission of a v-collective (desc.vectorCounts): the buffers are n blocks (n = the rank count),
 * block q being `counts[q]` elements at element offset `displs[q]`, each count at most desc.count.
 *  - AllToAll (AllToAllv): block q of sendbuf (sendCounts, sendDispls) goes to rank q, which stores
 *    it as block `rank` of its recvbuf (recvCounts, recvDispls). recvCounts[q] must equal rank q's
 *    sendCounts[rank]. No in-place form.
 *  - AllGather (AllGatherv): recvbuf's blocks (recvCounts, recvDispls, the same on every rank); rank
 *    r's sendbuf holds recvCounts[r] elements. In place: sendbuf == recvbuf + recvDispls[rank].
 *    sendCounts and sendDispls are NULL.
 *  - ReduceScatter (ReduceScatterv): sendbuf's blocks (sendCounts, sendDispls, the same on every
 *    rank) are reduced over the ranks, and rank r receives block r, sendCounts[r] elements, in
 *    recvbuf. In place: recvbuf == sendbuf + sendDispls[rank]. recvCounts and recvDispls are NULL.
 *  - Gather (Gatherv): the root's recvbuf holds the blocks (recvCounts, recvDispls); rank r's
 *    sendbuf holds recvCounts[r] elements. Every rank passes recvCounts (the same everywhere); only
 *    the root reads recvDispls (NULL elsewhere is fine) and recvbuf (NULL elsewhere is fine). In
 *    place, at the root: sendbuf == recvbuf + recvDispls[root]. sendCounts and sendDispls are NULL.
 *  - Scatter (Scatterv): the root's sendbuf holds the blocks (sendCounts, sendDispls), and rank r
 *    receives block r, sendCounts[r] elements, in recvbuf. Every rank passes sendCounts; only the
 *    root reads sendDispls and sendbuf. In place, at the root: recvbuf == sendbuf +
 *    sendDispls[root]. recvCounts and recvDispls are NULL.
 * The blocks of recvbuf must not overlap (those of sendbuf may). The arrays are read during the call
 * only. Counts that disagree between ranks fail the submission as occlSubmitCount's do, with a
 * message naming both lengths; the collective then stays failed. Otherwise as occlSubmit.
 */
typedef struct {
  const size_t* sendCounts;
  const size_t* sendDispls;
  const size_t* recvCounts;
  const size_t* recvDispls;
} occlVectors_t;
occlResult_t occlSubmitV(occlComm_t comm, uint64_t collId, const void* sendbuf, void* recvbuf,
                         const occlVectors_t* vectors, occlCallback_t callback, void* arg);
/*
 * Grouped submission: the `count` submissions of `subs` in one call, for a burst of small
 * collectives. Every entry is checked before any is queued: a bad one (not registered, bad
 * buffers, no room in its window) fails the call with its index in the message, and nothing is
 * submitted. Then all are queued in order under one lock and the daemon is woken once, which
 * costs much less per collective than `count` occlSubmit calls. Each entry is then an ordinary
 * submission: its callback fires once, and submissions of one collId, in a group or not, run in
 * submission order. A collId may appear several times, within its window
 * (config.maxInflightPerColl). `submitted` (may be NULL) receives how many were queued: `count` on
 * success, 0 when a check failed, and between them only when the communicator failed while
 * queuing (an abort, or a submission queue full for config.initTimeoutMs): the queued ones'
 * callbacks fire, the rest were not submitted.
 */
typedef struct {
  uint64_t collId;
  const void* sendbuf;
  void* recvbuf;
  occlCallback_t callback;
  void* arg;
  size_t count; /* elements, as occlSubmitCount's; OCCL_COUNT_REGISTERED for the registered count */
} occlSubmission_t;
occlResult_t occlSubmitGroup(occlComm_t comm, const occlSubmission_t* subs, int count, int* submitted);
/*
 * Gated submission: occlSubmitGated queues a submission as occlSubmit does, but this rank does not
 * start it before occlGateOpen(comm, *gate), which any thread may call at any time, a callback
 * too: the buffers' contents must be ready then, not at submission. Gates may open in any order on
 * any rank: a submission whose peers' gates are still closed waits like any other, preempted
 * while the daemon runs the rest, so no order deadlocks. config.collTimeoutMs counts from the
 * opening. A gate never opened holds its submission: occlCommFinalize waits for it (up to
 * config.collTimeoutMs), occlCommAbort fails it. Submissions of one collId still run in
 * submission order, so a closed gate also holds the later submissions of its collId.
 */
typedef struct {
  uint64_t collId;
  uint64_t seq; /* the submission's number within collId, from 0 */
} occlGate_t;
occlResult_t occlSubmitGated(occlComm_t comm, uint64_t collId, const void* sendbuf, void* recvbuf,
                             occlCallback_t callback, void* arg, occlGate_t* gate);
/* Opens a gate of occlSubmitGated, once; occlInvalidUsage for a gate that is open already or names
 * no outstanding gated submission. */
occlResult_t occlGateOpen(occlComm_t comm, occlGate_t gate);

/*
 * Stream-ordered submission (CUDA ranks): the submission starts when `stream` reaches it (the
 * stream's earlier work has written sendbuf) and the stream's later work waits until it completed
 * (recvbuf holds the result), with no host thread between them: the stream writes the
 * submission's gate and waits on its completion word with CUDA stream memory operations. The
 * callback still fires, with the status; a failed collective releases the stream too (check the
 * callback or occlCommGetAsyncError). Any order across ranks and streams is deadlock-free, as
 * with occlSubmitGated. `stream` is a cudaStream_t of this rank's device (struct CUstream_st* is
 * what cudaStream_t names); occlInvalidUsage on a communicator that is not on the CUDA backend.
 */
struct CUstream_st;
occlResult_t occlSubmitOnStream(occlComm_t comm, uint64_t collId, const void* sendbuf, void* recvbuf,
                                struct CUstream_st* stream, occlCallback_t callback, void* arg);

/* Waits until the callbacks of every submission made before this call have fired (later
 * submissions, such as a callback's next step, are not waited for, even if they fire first): at most timeoutMs
 * (0..OCCL_MAX_TIMEOUT_MS) milliseconds, or without bound when timeoutMs < 0. On the host backend
 * the waiting thread runs the daemon and fires callbacks itself while that makes progress, so a
 * blocking caller gets its result without a thread hand-off. */
occlResult_t occlCommWaitAll(occlComm_t comm, int64_t timeoutMs);

occlResult_t occlCollGetStats(occlComm_t comm, uint64_t collId, occlCollStats_t* stats);

/* Where a submission's time went on this rank, per part (a daemon block's share of it), with
 * config.timelineDepth > 0. Times are the daemon's clock in nanoseconds (a GPU's globaltimer, the
 * host's steady clock): compare them with each other, not with the host's clocks. */
typedef struct {
  uint64_t collId;
  uint64_t seq;          /* the collective's submission number on this rank, from 0 */
  uint64_t takenNs;      /* the daemon block took the submission from the queue */
  uint64_t startedNs;    /* its first try began (context loaded) */
  uint64_t firstDataNs;  /* a primitive of the try that finished the part first moved data; 0 if
                            none did (a submission preempted on the way waited before it) */
  uint64_t lastDataNs;   /* ... and last */
  uint64_t doneNs;       /* the part finished; for the part that completed the submission, after its
                            completion entry was written */
  uint32_t part;
  int completed;         /* 1 for the part that wrote the completion entry */
} occlTimelineEntry_t;

/* Lists the newest records each daemon block kept (up to config.timelineDepth each, oldest first,
 * block by block), copies the first `capacity` of that list into entries and sets *count to how
 * many it copied; with entries NULL and capacity 0, *count is how many there are. A part writes
 * its record just after it finished (and the completing part after its completion entry), so a
 * record may appear a moment after the callback has fired. */
occlResult_t occlCommGetTimeline(occlComm_t comm, occlTimelineEntry_t* entries, int capacity, int* count);

/* Who is missing, live: why a pending submission has not completed, one row per peer it waits on
 * (occlCommGetPending). Each rank's registrations and submission counts are gathered every 50 ms
 * (by the bootstrap root for ranks that are processes, in the process for occlCommInitAll's
 * threads), so a row may be that much behind. */
typedef enum {
  occlWaitNotSubmitted = 0,  /* the peer has not made this submission of collId yet */
  occlWaitNotRegistered = 1, /* the peer has no collective registered under collId */
  occlWaitMismatch = 2,      /* the peer registered collId differently (type, count, datatype, op,
                                root or algorithm; for send/recv, not the matching half) */
  occlWaitSilent = 3,        /* the peer made it, but has not been heard from for over a second:
                                stopped, hung, or starved */
  occlWaitInFlight = 4,      /* every peer made it: the data is on its way (peer = -1) */
  occlWaitUnknown = 5,       /* the ranks' status could not be read: the bootstrap root did not answer
                                (peer = 0 if it is silent, else -1) or the communicator failed */
  occlNumWaitReasons = 6
} occlWaitReason_t;

typedef struct {
  uint64_t collId;
  uint64_t seq;            /* the pending submission's number on this rank, from 0 */
  int peer;                /* the rank it waits on, or -1 (see occlWaitReason_t) */
  int reason;              /* occlWaitReason_t */
  uint64_t peerSubmitted;  /* submissions of collId the peer has made (0 unless registered alike) */
  uint64_t peerLastCollId; /* what the peer did last: the collId whose registration or submission */
  uint64_t peerLastCount;  /*   changed last there, and its submission count then; */
  int64_t peerLastAgoMs;   /*   how long ago (-1: nothing known) */
  int64_t peerSilentMs;    /* since the peer was last heard from; -1 where not tracked (threads of
                              one process, a root that did not answer) */
} occlPendingWait_t;

/* Lists, for every submission of this rank whose callback has not fired, the peers it waits on
 * and why (as occlCommGetTimeline: the first `capacity` rows into waits, *count set to how many
 * were copied; with waits NULL and capacity 0, how many there are). A submission that waits on
 * nobody in particular has one row with peer -1. Bounded: a root that does not answer within
 * 300 ms gives occlWaitUnknown rows. */
occlResult_t occlCommGetPending(occlComm_t comm, occlPendingWait_t* waits, int capacity, int* count);
/* "not submitted", "not registered", ...; "unknown reason" outside the enum. */
const char* occlWaitReasonString(int reason);

/* Host memory that the ranks in other processes of this host can map, for collectives
 * registered with desc.sharedBuffers = 1 (as ncclMemAlloc's memory is for NCCL's user-buffer
 * registration): `size` bytes (> 0), page-aligned, zeroed. Ranks reach it through
 * /proc/<pid>/fd of the allocating process, so they must run as the same user in one pid
 * namespace (ranks in several run the ring instead). Free with occlMemFree once no submission
 * that uses it is pending. */
occlResult_t occlMemAlloc(void** ptr, size_t size);
occlResult_t occlMemFree(void* ptr);

#ifdef __cplusplus
}
#endif

#endif /* OCCL_OCCL_H_ */
