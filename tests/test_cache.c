/*
 * test_cache.c — the kernel cache (src/runtime/cache.c) under many threads,
 * with a fake compile function and no driver.
 *
 * The fake compile sleeps (so that misses on one key overlap), counts its
 * calls per key, and returns a small heap value that names its key and is
 * marked dead when the cache destroys it. The checks:
 *   - single flight: 16 threads x many lookups over 64 keys compile each
 *     key exactly once; everyone gets the value of their key; the stats add
 *     up (misses = keys, hits = the rest);
 *   - a failed compile reaches every waiter with its status and message,
 *     leaves the table, and is compiled again by a later lookup;
 *   - eviction: a small capacity under the same load never destroys a value
 *     someone holds (each holder checks its value is alive), destroys each
 *     evicted value once, and everything at rt_cache_free;
 *   - pinned entries survive any amount of eviction.
 * Thread safety is checked by running this suite under ThreadSanitizer
 * (-fsanitize=thread) and valgrind --tool=helgrind; tests/README.md has the
 * commands.
 */
#define _POSIX_C_SOURCE 200809L

#include "runtime/runtime.h"

#include "support.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define KEYS    64
#define THREADS 16
#define ALIVE   0x5eed5eedu

typedef struct Value {
  unsigned magic;
  int key;
} Value;

/* Shared by the fake compile and destroy of one test. */
typedef struct World {
  atomic_int compiles[KEYS];
  atomic_int destroyed;
  int fail_every; /* keys with index % fail_every == 0 fail (0: none) */
  int sleep_us;
} World;

typedef struct Job {
  World *world;
  int key;
} Job;

static void sleep_us(int us) {
  struct timespec t = {us / 1000000, (long)(us % 1000000) * 1000};
  nanosleep(&t, NULL);
}

static tj_status fake_compile(void *arg, RtCompiled *out) {
  Job *job = arg;
  atomic_fetch_add(&job->world->compiles[job->key], 1);
  sleep_us(job->world->sleep_us);
  if (job->world->fail_every && job->key % job->world->fail_every == 0) {
    snprintf(out->error, RT_ERROR_MAX, "fake failure for key %d", job->key);
    return TJ_ERR_DRIVER;
  }
  Value *v = malloc(sizeof *v);
  if (!v) return TJ_ERR_OUT_OF_MEMORY;
  v->magic = ALIVE;
  v->key = job->key;
  out->value = v;
  out->codegen_us = 1.0;
  out->jit_ms = 0.5;
  return TJ_OK;
}

static void fake_destroy(void *owner, void *value) {
  World *w = owner;
  Value *v = value;
  ck_assert_uint_eq(v->magic, ALIVE);
  v->magic = 0;
  atomic_fetch_add(&w->destroyed, 1);
  free(v);
}

static void key_text(int key, char *out, size_t size) {
  /* Long keys sharing a prefix: the full comparison decides, not a prefix. */
  snprintf(out, size, "tilejit 0.1.0|softmax#0123456789abcdef|DTYPE=f32|BLOCK=%d|ctx=1", key);
}

/* One lookup of key: checks the outcome, holds the value briefly. */
static void lookup(RtCache *c, World *w, int key, int hold_us) {
  char text[128], error[RT_ERROR_MAX];
  key_text(key, text, sizeof text);
  Job job = {w, key};
  RtEntry *e = NULL;
  tj_status st = rt_cache_get(c, text, fake_compile, &job, &e, error);
  if (w->fail_every && key % w->fail_every == 0) {
    ck_assert_int_eq(st, TJ_ERR_DRIVER);
    ck_assert_ptr_null(e);
    char want[64];
    snprintf(want, sizeof want, "fake failure for key %d", key);
    ck_assert_str_eq(error, want);
    return;
  }
  ck_assert_int_eq(st, TJ_OK);
  Value *v = rt_entry_value(e);
  ck_assert_uint_eq(v->magic, ALIVE);
  ck_assert_int_eq(v->key, key);
  if (hold_us) sleep_us(hold_us);
  ck_assert_uint_eq(v->magic, ALIVE);
  rt_entry_release(e);
}

/* ------------------------------------------------------------ threads */

typedef struct Worker {
  pthread_t thread;
  RtCache *cache;
  World *world;
  pthread_barrier_t *start;
  int index, lookups, keys, hold_us;
  bool same_key_first; /* every thread first asks for key 1 at once */
} Worker;

static void *work(void *arg) {
  Worker *me = arg;
  uint64_t state = 0x9e3779b97f4a7c15ull * (uint64_t)(me->index + 1);
  pthread_barrier_wait(me->start);
  if (me->same_key_first) lookup(me->cache, me->world, 1, me->hold_us);
  for (int i = 0; i < me->lookups; i++) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    lookup(me->cache, me->world, (int)((state >> 33) % (uint64_t)me->keys), me->hold_us);
  }
  return NULL;
}

/* Runs THREADS workers over the first `keys` keys. */
static void run_workers(RtCache *c, World *w, int keys, int lookups, int hold_us, bool same_first) {
  Worker workers[THREADS];
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, THREADS);
  for (int i = 0; i < THREADS; i++) {
    workers[i] = (Worker){.cache = c,
                          .world = w,
                          .start = &start,
                          .index = i,
                          .lookups = lookups,
                          .keys = keys,
                          .hold_us = hold_us,
                          .same_key_first = same_first};
    ck_assert_int_eq(pthread_create(&workers[i].thread, NULL, work, &workers[i]), 0);
  }
  for (int i = 0; i < THREADS; i++) pthread_join(workers[i].thread, NULL);
  pthread_barrier_destroy(&start);
}

static int total_compiles(World *w) {
  int total = 0;
  for (int k = 0; k < KEYS; k++) total += atomic_load(&w->compiles[k]);
  return total;
}

/* -------------------------------------------------------------- tests */

START_TEST(single_flight_under_contention) {
  static World w;
  memset(&w, 0, sizeof w);
  w.sleep_us = 2000;
  RtCache *c = rt_cache_new(KEYS, fake_destroy, &w);
  ck_assert_ptr_nonnull(c);
  const int lookups = 300;
  run_workers(c, &w, KEYS, lookups, 0, true);
  for (int k = 0; k < KEYS; k++)
    ck_assert_msg(atomic_load(&w.compiles[k]) == 1, "key %d compiled %d times", k,
                  atomic_load(&w.compiles[k]));
  tj_cache_stats s;
  rt_cache_stats(c, &s);
  uint64_t total = (uint64_t)THREADS * (lookups + 1);
  ck_assert_uint_eq(s.misses, KEYS);
  ck_assert_uint_eq(s.hits, total - KEYS);
  ck_assert_uint_eq(s.evictions, 0);
  ck_assert_uint_eq(s.failures, 0);
  ck_assert_int_eq(s.entries, KEYS);
  ck_assert_double_eq_tol(s.codegen_us, KEYS * 1.0, 1e-9);
  ck_assert_double_eq_tol(s.jit_ms, KEYS * 0.5, 1e-9);
  rt_cache_free(c);
  ck_assert_int_eq(atomic_load(&w.destroyed), KEYS);
}
END_TEST

START_TEST(failure_reaches_every_waiter_and_is_retried) {
  static World w;
  memset(&w, 0, sizeof w);
  w.sleep_us = 100000; /* all threads arrive while key 1's compile runs */
  w.fail_every = 1;    /* every key fails */
  RtCache *c = rt_cache_new(8, fake_destroy, &w);
  run_workers(c, &w, 1, 0, 0, true);
  ck_assert_int_eq(atomic_load(&w.compiles[1]), 1);
  tj_cache_stats s;
  rt_cache_stats(c, &s);
  ck_assert_uint_eq(s.failures, 1);
  ck_assert_int_eq(s.entries, 0);
  /* The failure is not cached: the next lookup compiles again. */
  w.sleep_us = 0;
  lookup(c, &w, 1, 0);
  ck_assert_int_eq(atomic_load(&w.compiles[1]), 2);
  rt_cache_free(c);
  ck_assert_int_eq(atomic_load(&w.destroyed), 0);
}
END_TEST

START_TEST(failures_mixed_with_successes) {
  static World w;
  memset(&w, 0, sizeof w);
  w.sleep_us = 500;
  w.fail_every = 5;
  RtCache *c = rt_cache_new(KEYS, fake_destroy, &w);
  run_workers(c, &w, KEYS, 200, 0, false);
  for (int k = 0; k < KEYS; k++)
    if (k % 5) ck_assert_int_eq(atomic_load(&w.compiles[k]), 1);
  tj_cache_stats s;
  rt_cache_stats(c, &s);
  ck_assert_int_eq(s.entries, KEYS - (KEYS + 4) / 5);
  ck_assert_uint_eq(s.misses, (uint64_t)total_compiles(&w));
  ck_assert_uint_eq(s.failures, s.misses - (uint64_t)s.entries);
  rt_cache_free(c);
  ck_assert_int_eq(atomic_load(&w.destroyed), KEYS - (KEYS + 4) / 5);
}
END_TEST

START_TEST(eviction_never_destroys_a_held_value) {
  static World w;
  memset(&w, 0, sizeof w);
  w.sleep_us = 200;
  const int capacity = 4;
  RtCache *c = rt_cache_new(capacity, fake_destroy, &w);
  run_workers(c, &w, KEYS, 300, 50, false);
  tj_cache_stats s;
  rt_cache_stats(c, &s);
  ck_assert_uint_gt(s.evictions, 0);
  ck_assert_uint_eq(s.misses, (uint64_t)total_compiles(&w));
  ck_assert_int_eq(atomic_load(&w.destroyed), (int)s.evictions);
  ck_assert_int_eq((int64_t)s.misses - (int64_t)s.evictions, s.entries);
  /* Eviction runs after each compile; holders may keep a few extra. */
  ck_assert_int_le(s.entries, capacity + THREADS);
  rt_cache_free(c);
  ck_assert_uint_eq((uint64_t)atomic_load(&w.destroyed), s.misses);
}
END_TEST

START_TEST(pinned_entries_stay) {
  static World w;
  memset(&w, 0, sizeof w);
  RtCache *c = rt_cache_new(2, fake_destroy, &w);
  char text[128], error[RT_ERROR_MAX];
  Job job = {&w, 0};
  RtEntry *pinned;
  key_text(0, text, sizeof text);
  ck_assert_int_eq(rt_cache_get(c, text, fake_compile, &job, &pinned, error), TJ_OK);
  rt_cache_pin(c, pinned);
  rt_entry_release(pinned);
  for (int k = 1; k < KEYS; k++) lookup(c, &w, k, 0);
  Value *v = rt_entry_value(pinned);
  ck_assert_uint_eq(v->magic, ALIVE);
  lookup(c, &w, 0, 0);
  ck_assert_int_eq(atomic_load(&w.compiles[0]), 1);
  tj_cache_stats s;
  rt_cache_stats(c, &s);
  ck_assert_int_eq(s.entries, 2);
  ck_assert_uint_eq(s.evictions, KEYS - 2);
  rt_cache_free(c);
}
END_TEST

START_TEST(retained_entry_outlives_eviction_pressure) {
  static World w;
  memset(&w, 0, sizeof w);
  RtCache *c = rt_cache_new(1, fake_destroy, &w);
  char text[128], error[RT_ERROR_MAX];
  Job job = {&w, 3};
  RtEntry *held;
  key_text(3, text, sizeof text);
  ck_assert_int_eq(rt_cache_get(c, text, fake_compile, &job, &held, error), TJ_OK);
  rt_entry_retain(held); /* a second holder, as a fast-path slot is */
  rt_entry_release(held);
  for (int k = 4; k < 20; k++) lookup(c, &w, k, 0);
  ck_assert_uint_eq(((Value *)rt_entry_value(held))->magic, ALIVE);
  rt_entry_release(held);
  lookup(c, &w, 30, 0); /* now key 3 may go */
  tj_cache_stats s;
  rt_cache_stats(c, &s);
  ck_assert_int_eq(s.entries, 1);
  ck_assert_int_eq(atomic_load(&w.destroyed), 17); /* keys 4..18, then 3 and 19 */
  rt_cache_free(c);
  ck_assert_int_eq(atomic_load(&w.destroyed), 18);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("cache");
  TCase *t = tcase_create("threads");
  tcase_set_timeout(t, 300);
  tcase_add_test(t, single_flight_under_contention);
  tcase_add_test(t, failure_reaches_every_waiter_and_is_retried);
  tcase_add_test(t, failures_mixed_with_successes);
  tcase_add_test(t, eviction_never_destroys_a_held_value);
  tcase_add_test(t, pinned_entries_stay);
  tcase_add_test(t, retained_entry_outlives_eviction_pressure);
  suite_add_tcase(s, t);
  return s;
}

int main(void) {
  return test_run_suite(suite());
}
