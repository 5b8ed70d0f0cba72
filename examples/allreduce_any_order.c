/*
 * Two AllReduces on 4 ranks, submitted in opposite orders: even ranks submit A then B, odd ranks
 * B then A. Under NCCL's rule (same order on every rank) this program would deadlock; occl runs
 * both. The pattern to copy: register each collective once under a collId, submit it whenever
 * its data is ready with a callback, then wait.
 *
 * The ranks are threads of this process (occlCommInitAll); with one rank per process, use
 * occlCommInitRank or occlCommInitFromEnv and nothing else changes.
 */
#include <occl/occl.h>
#include <stdio.h>
#include <stdlib.h>

#define NRANKS 4
#define COUNT_A 65536 /* elements; two sizes so the collectives are not interchangeable */
#define COUNT_B 1000
/* collIds are the framework's choice: any 64-bit value, the same on every rank. */
#define COLL_A 0xA
#define COLL_B 0xB

/* What a callback reports back. Each (rank, collective) has its own slot, so the callbacks,
 * which run on each rank's poller thread, never write the same memory. */
typedef struct {
  uint64_t collId;
  occlResult_t status;
} Completion;

static void onDone(uint64_t collId, occlResult_t status, void* arg) {
  Completion* c = (Completion*)arg;
  c->collId = collId;
  c->status = status; /* a callback must not block: record and return */
}

static int ok(occlResult_t r, occlComm_t comm, const char* what) {
  if (r == occlSuccess) return 1;
  fprintf(stderr, "allreduce_any_order: %s: %s: %s\n", what, occlGetErrorString(r), occlGetLastError(comm));
  return 0;
}

/* Small integers: the sum is exact in float whatever order the ring adds them in. */
static float input(int rank, size_t i) { return (float)(rank + 1) * (float)(i % 7 + 1); }

static float expected(size_t i) { return (float)(NRANKS * (NRANKS + 1) / 2) * (float)(i % 7 + 1); }

static int registerAllReduce(occlComm_t comm, uint64_t collId, size_t count) {
  occlCollDesc_t d;
  occlCollDescInit(&d);
  d.type = occlCollAllReduce;
  d.count = count;
  d.datatype = occlFloat32;
  d.op = occlSum;
  return ok(occlCollRegister(comm, collId, &d), comm, "occlCollRegister");
}

static int submitBoth(occlComm_t comm, int rank, float* a, float* b, Completion done[2]) {
  /* The point of the example: the order differs between neighbouring ranks. */
  const int aFirst = rank % 2 == 0;
  done[0].collId = done[1].collId = 0;
  done[0].status = done[1].status = occlInProgress;
  if (aFirst && !ok(occlSubmit(comm, COLL_A, a, a, onDone, &done[0]), comm, "occlSubmit A")) return 0;
  if (!ok(occlSubmit(comm, COLL_B, b, b, onDone, &done[1]), comm, "occlSubmit B")) return 0;
  if (!aFirst && !ok(occlSubmit(comm, COLL_A, a, a, onDone, &done[0]), comm, "occlSubmit A")) return 0;
  return 1;
}

static int checkResult(int rank, const char* name, uint64_t collId, const float* buf, size_t count,
                       const Completion* done) {
  size_t i;
  if (done->collId != collId || done->status != occlSuccess) {
    fprintf(stderr, "allreduce_any_order: rank %d collective %s: callback for collId %#llx with %s\n", rank, name,
            (unsigned long long)done->collId, occlGetErrorString(done->status));
    return 0;
  }
  for (i = 0; i < count; ++i) {
    if (buf[i] != expected(i)) {
      fprintf(stderr, "allreduce_any_order: rank %d %s[%zu] = %g, expected %g\n", rank, name, i, buf[i], expected(i));
      return 0;
    }
  }
  return 1;
}

/* Registers, submits and checks on every rank; returns 1 when every element is right. */
static int run(occlComm_t comms[NRANKS], float* a[NRANKS], float* b[NRANKS], Completion done[NRANKS][2]) {
  int r, good = 1;
  size_t i;
  for (r = 0; r < NRANKS; ++r) {
    for (i = 0; i < COUNT_A; ++i) a[r][i] = input(r, i);
    for (i = 0; i < COUNT_B; ++i) b[r][i] = input(r, i);
    if (!registerAllReduce(comms[r], COLL_A, COUNT_A) || !registerAllReduce(comms[r], COLL_B, COUNT_B)) return 0;
  }
  /* One thread submits for every rank here; a framework would submit from each rank's own
   * thread. Either way a submission never waits for a peer. */
  for (r = 0; r < NRANKS; ++r)
    if (!submitBoth(comms[r], r, a[r], b[r], done[r])) return 0;
  /* The callbacks have fired, and their writes are visible, once occlCommWaitAll returns. */
  for (r = 0; r < NRANKS; ++r)
    if (!ok(occlCommWaitAll(comms[r], -1), comms[r], "occlCommWaitAll")) return 0;
  for (r = 0; r < NRANKS; ++r) {
    good &= checkResult(r, "A", COLL_A, a[r], COUNT_A, &done[r][0]);
    good &= checkResult(r, "B", COLL_B, b[r], COUNT_B, &done[r][1]);
  }
  return good;
}

/* Finalize waits for what is still in flight; after an error, abort stops without waiting and
 * frees the communicator itself (no occlCommDestroy after it). */
static int closeAll(occlComm_t comms[NRANKS], int afterError) {
  int r, closed = 1;
  for (r = 0; r < NRANKS; ++r) {
    if (afterError) {
      occlCommAbort(comms[r]);
      continue;
    }
    closed &= ok(occlCommFinalize(comms[r]), comms[r], "occlCommFinalize");
    occlCommDestroy(comms[r]);
  }
  return closed;
}

int main(void) {
  occlComm_t comms[NRANKS];
  float* a[NRANKS];
  float* b[NRANKS];
  /* Like the buffers, the callbacks' slots must outlive the communicators: after an error,
   * callbacks of what was pending may still fire until occlCommAbort returns. */
  Completion done[NRANKS][2];
  occlConfig_t config;
  int r, good = 0;

  /* occlConfigInit applies the OCCL_* environment; a timeout turns a bug into an error. */
  if (!ok(occlConfigInit(&config), NULL, "occlConfigInit")) return 1;
  config.collTimeoutMs = 60000;
  if (!ok(occlCommInitAll(comms, NRANKS, NULL, &config), NULL, "occlCommInitAll")) return 1;
  for (r = 0; r < NRANKS; ++r) {
    a[r] = (float*)malloc(COUNT_A * sizeof(float));
    b[r] = (float*)malloc(COUNT_B * sizeof(float));
  }
  for (r = 0; r < NRANKS; ++r)
    if (a[r] == NULL || b[r] == NULL) break;
  if (r == NRANKS) good = run(comms, a, b, done);
  good &= closeAll(comms, !good);
  for (r = 0; r < NRANKS; ++r) {
    free(a[r]);
    free(b[r]);
  }
  printf("allreduce_any_order: %d ranks, AllReduce %#x and %#x in opposite orders on even/odd ranks: %s\n", NRANKS,
         COLL_A, COLL_B, good ? "OK" : "WRONG");
  return good ? 0 : 1;
}
