/* Consumer of the installed occl: the library's version matches the installed header, and one
 * AllReduce runs on 2 ranks of this process. Exits non-zero on any failure. */
#include <occl/occl.h>
#include <stdio.h>

#define COUNT 1000

static void onDone(uint64_t collId, occlResult_t status, void* arg) {
  (void)collId;
  *(occlResult_t*)arg = status;
}

static int ok(occlResult_t r, occlComm_t comm, const char* what) {
  if (r != occlSuccess) fprintf(stderr, "consumer: %s: %s: %s\n", what, occlGetErrorString(r), occlGetLastError(comm));
  return r == occlSuccess;
}

/* Registers and submits on both ranks, waits, and checks every element of both outputs. */
static int allReduce(occlComm_t comms[2]) {
  static int32_t send[2][COUNT], recv[2][COUNT];
  occlResult_t status[2] = {occlInProgress, occlInProgress};
  occlCollDesc_t d;
  int r;
  size_t i;
  occlCollDescInit(&d);
  d.type = occlCollAllReduce;
  d.count = COUNT;
  d.datatype = occlInt32;
  d.op = occlSum;
  for (r = 0; r < 2; ++r) {
    for (i = 0; i < COUNT; ++i) send[r][i] = (int32_t)((r + 1) * (int)i);
    if (!ok(occlCollRegister(comms[r], 7, &d), comms[r], "occlCollRegister")) return 0;
    if (!ok(occlSubmit(comms[r], 7, send[r], recv[r], onDone, &status[r]), comms[r], "occlSubmit")) return 0;
  }
  for (r = 0; r < 2; ++r) {
    if (!ok(occlCommWaitAll(comms[r], 60000), comms[r], "occlCommWaitAll")) return 0;
    if (!ok(status[r], comms[r], "AllReduce")) return 0;
    for (i = 0; i < COUNT; ++i) {
      if (recv[r][i] != 3 * (int32_t)i) {
        fprintf(stderr, "consumer: rank %d element %zu = %d, expected %d\n", r, i, (int)recv[r][i], 3 * (int)i);
        return 0;
      }
    }
  }
  return 1;
}

int main(void) {
  occlComm_t comms[2];
  occlConfig_t config;
  int version = 0, good, r;
  if (!ok(occlGetVersion(&version), NULL, "occlGetVersion")) return 1;
  if (version != OCCL_VERSION_CODE) {
    fprintf(stderr, "consumer: library version %d, header version %d\n", version, OCCL_VERSION_CODE);
    return 1;
  }
  if (!ok(occlConfigInit(&config), NULL, "occlConfigInit")) return 1;
  config.collTimeoutMs = 60000;
  if (!ok(occlCommInitAll(comms, 2, NULL, &config), NULL, "occlCommInitAll")) return 1;
  good = allReduce(comms);
  for (r = 0; r < 2; ++r) {
    if (good) good = ok(occlCommFinalize(comms[r]), comms[r], "occlCommFinalize");
    occlCommDestroy(comms[r]);
  }
  printf("consumer: occl %d, AllReduce on 2 ranks: %s\n", version, good ? "OK" : "WRONG");
  return good ? 0 : 1;
}
