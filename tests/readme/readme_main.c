/*
 * Runs the README's API snippet (generated into readme_snippet.c) on 2 ranks, one thread each,
 * joined through occlGetUniqueId and occlCommInitRank exactly as the snippet expects, and checks
 * that both AllReduces summed every element.
 */
#define _POSIX_C_SOURCE 200809L /* pthreads under -std=c99 */
#include <occl/occl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

int occlReadmeSnippet(int nranks, occlUniqueId id, int rank, size_t n, size_t m, float* grad1, float* grad2);

#define NRANKS 2
#define N 4096
#define M 100

typedef struct {
  occlUniqueId id;
  int rank;
  float grad1[N];
  float grad2[M];
} Rank;

static void* runRank(void* arg) {
  Rank* r = (Rank*)arg;
  occlReadmeSnippet(NRANKS, r->id, r->rank, N, M, r->grad1, r->grad2);
  return NULL;
}

/* Rank r holds (r + 1) * (i % 3 + 1): small integers, so the float sum is exact in any order. */
static float value(int rank, size_t i) { return (float)(rank + 1) * (float)(i % 3 + 1); }

static int summed(const Rank* r, const float* buf, size_t count, const char* name) {
  size_t i;
  for (i = 0; i < count; ++i) {
    float want = value(0, i) + value(1, i);
    if (buf[i] != want) {
      fprintf(stderr, "readme_api: rank %d %s[%zu] = %g, expected %g\n", r->rank, name, i, buf[i], want);
      return 0;
    }
  }
  return 1;
}

int main(void) {
  static Rank ranks[NRANKS];
  pthread_t threads[NRANKS];
  occlUniqueId id;
  int r, good = 1;
  size_t i;
  if (occlGetUniqueId(&id) != occlSuccess) {
    fprintf(stderr, "readme_api: occlGetUniqueId: %s\n", occlGetLastError(NULL));
    return 1;
  }
  for (r = 0; r < NRANKS; ++r) {
    ranks[r].id = id;
    ranks[r].rank = r;
    for (i = 0; i < N; ++i) ranks[r].grad1[i] = value(r, i);
    for (i = 0; i < M; ++i) ranks[r].grad2[i] = value(r, i);
  }
  for (r = 0; r < NRANKS; ++r)
    if (pthread_create(&threads[r], NULL, runRank, &ranks[r]) != 0) return 1;
  for (r = 0; r < NRANKS; ++r) pthread_join(threads[r], NULL);
  for (r = 0; r < NRANKS; ++r) {
    good &= summed(&ranks[r], ranks[r].grad1, N, "grad1");
    good &= summed(&ranks[r], ranks[r].grad2, M, "grad2");
  }
  printf("readme_api: the README snippet on %d ranks: %s\n", NRANKS, good ? "OK" : "WRONG");
  return good ? 0 : 1;
}
