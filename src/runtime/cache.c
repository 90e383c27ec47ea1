/*
 * cache.c — the kernel cache: an in-memory map from a full key string to a
 * compiled value, single-flight and bounded (LRU).
 *
 * A lookup hashes the key (FNV-1a) and compares the whole key text in its
 * bucket, so a hash collision can never hand out the wrong kernel. On a miss
 * the caller inserts a PENDING entry, drops the lock and compiles; callers
 * that find a PENDING entry wait on the condition variable and get the same
 * value, or the same failure. A failed entry leaves the table at once, so a
 * later call compiles again.
 *
 * Entries are reference counted. A reference is taken under the lock (or
 * from a JIT function's table that already holds one, see function.c) and
 * dropped with one atomic decrement, so releasing never locks. Eviction,
 * after each compile, takes the least recently used entries that are
 * ready, unpinned and unreferenced, and destroys their values after the
 * lock is dropped (the runtime's destroy unloads a module). Pinned entries
 * (tj_compile's kernels) stay until rt_cache_free.
 *
 * The compile and destroy steps are function pointers, so tests/test_cache.c
 * drives this file with a fake compile and no driver.
 */
#include "runtime/runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum EntryState { ENTRY_PENDING, ENTRY_READY, ENTRY_FAILED } EntryState;

struct RtEntry {
  char *key;
  uint64_t hash;
  EntryState state; /* under the lock */
  atomic_int refs;
  bool pinned;
  void *value;      /* READY */
  tj_status status; /* FAILED */
  char *error;      /* FAILED; NULL if it could not be copied */
  RtEntry *next;    /* bucket chain; the victim list once evicted */
  RtEntry *newer, *older;
};

struct RtCache {
  pthread_mutex_t lock;
  pthread_cond_t done; /* broadcast whenever a compile finishes */
  RtEntry **buckets;
  uint64_t bucket_mask;
  RtEntry *newest, *oldest;
  int count, capacity;
  RtDestroyFn destroy;
  void *owner;
  atomic_uint_fast64_t hits;
  uint64_t misses, evictions, failures;
  double codegen_us, jit_ms;
};

RtCache *rt_cache_new(int capacity, RtDestroyFn destroy, void *owner) {
  RtCache *c = tj_alloc(sizeof *c);
  if (!c) return NULL;
  uint64_t buckets = 16;
  while (buckets < 2 * (uint64_t)capacity) buckets <<= 1;
  if (!(c->buckets = tj_alloc(buckets * sizeof *c->buckets))) {
    free(c);
    return NULL;
  }
  c->bucket_mask = buckets - 1;
  c->capacity = capacity > 0 ? capacity : 1;
  c->destroy = destroy;
  c->owner = owner;
  pthread_mutex_init(&c->lock, NULL);
  pthread_cond_init(&c->done, NULL);
  return c;
}

static void free_entry(RtEntry *e) {
  free(e->key);
  free(e->error);
  free(e);
}

void rt_cache_free(RtCache *c) {
  if (!c) return;
  for (RtEntry *e = c->newest, *older; e; e = older) {
    older = e->older;
    if (e->state == ENTRY_READY && c->destroy) c->destroy(c->owner, e->value);
    free_entry(e);
  }
  pthread_cond_destroy(&c->done);
  pthread_mutex_destroy(&c->lock);
  free(c->buckets);
  free(c);
}

/* ------------------------------------------------ table and LRU (locked) */

static RtEntry *find(RtCache *c, const char *key, uint64_t hash) {
  for (RtEntry *e = c->buckets[hash & c->bucket_mask]; e; e = e->next)
    if (e->hash == hash && strcmp(e->key, key) == 0) return e;
  return NULL;
}

static void lru_push(RtCache *c, RtEntry *e) {
  e->older = c->newest;
  e->newer = NULL;
  if (c->newest) c->newest->newer = e;
  c->newest = e;
  if (!c->oldest) c->oldest = e;
}

static void lru_remove(RtCache *c, RtEntry *e) {
  if (e->newer)
    e->newer->older = e->older;
  else
    c->newest = e->older;
  if (e->older)
    e->older->newer = e->newer;
  else
    c->oldest = e->newer;
  e->newer = e->older = NULL;
}

static void link_entry(RtCache *c, RtEntry *e) {
  RtEntry **bucket = &c->buckets[e->hash & c->bucket_mask];
  e->next = *bucket;
  *bucket = e;
  lru_push(c, e);
  c->count++;
}

static void unlink_entry(RtCache *c, RtEntry *e) {
  RtEntry **p = &c->buckets[e->hash & c->bucket_mask];
  while (*p != e) p = &(*p)->next;
  *p = e->next;
  e->next = NULL;
  lru_remove(c, e);
  c->count--;
}

/* Unlinks unreferenced, unpinned, ready entries from the old end until the
 * cache fits; returns them as a list for destruction outside the lock. */
static RtEntry *evict_over_capacity(RtCache *c) {
  RtEntry *victims = NULL;
  for (RtEntry *e = c->oldest, *newer; e && c->count > c->capacity; e = newer) {
    newer = e->newer;
    if (e->state != ENTRY_READY || e->pinned || atomic_load(&e->refs) > 0) continue;
    unlink_entry(c, e);
    e->next = victims;
    victims = e;
    c->evictions++;
  }
  return victims;
}

static void destroy_victims(RtCache *c, RtEntry *victims) {
  for (RtEntry *e = victims, *next; e; e = next) {
    next = e->next;
    if (c->destroy) c->destroy(c->owner, e->value);
    free_entry(e);
  }
}

/* Drops a reference to a failed (unlinked) entry; the last one frees it. */
static void drop_failed(RtEntry *e) {
  if (atomic_fetch_sub(&e->refs, 1) == 1) free_entry(e);
}

static void copy_error(char *error, const RtEntry *e) {
  snprintf(error, RT_ERROR_MAX, "%s", e->error ? e->error : "compile failed (out of memory)");
}

/* ------------------------------------------------------------- lookups */

/* Called with the lock held on a found entry; returns with it released. */
static tj_status wait_for(RtCache *c, RtEntry *e, RtEntry **out, char *error) {
  atomic_fetch_add(&e->refs, 1);
  while (e->state == ENTRY_PENDING) pthread_cond_wait(&c->done, &c->lock);
  tj_status st = TJ_OK;
  if (e->state == ENTRY_READY) {
    atomic_fetch_add_explicit(&c->hits, 1, memory_order_relaxed);
    lru_remove(c, e);
    lru_push(c, e);
    *out = e;
  } else {
    st = e->status;
    copy_error(error, e);
    drop_failed(e);
  }
  pthread_mutex_unlock(&c->lock);
  return st;
}

/* Runs the compile for a PENDING entry the caller inserted (holding one
 * reference), publishes the result and wakes the waiters. */
static tj_status run_compile(RtCache *c, RtEntry *e, RtCompileFn compile, void *arg, RtEntry **out,
                             char *error) {
  RtCompiled result = {.error = error};
  error[0] = '\0';
  tj_status st = compile(arg, &result);
  RtEntry *victims = NULL;
  pthread_mutex_lock(&c->lock);
  if (st == TJ_OK) {
    e->value = result.value;
    e->state = ENTRY_READY;
    c->codegen_us += result.codegen_us;
    c->jit_ms += result.jit_ms;
    victims = evict_over_capacity(c);
    *out = e;
  } else {
    e->state = ENTRY_FAILED;
    e->status = st;
    e->error = tj_strdup(error[0] ? error : "compile failed");
    c->failures++;
    unlink_entry(c, e);
    drop_failed(e);
  }
  pthread_cond_broadcast(&c->done);
  pthread_mutex_unlock(&c->lock);
  destroy_victims(c, victims);
  return st;
}

tj_status rt_cache_get(RtCache *c, const char *key, RtCompileFn compile, void *arg, RtEntry **out,
                       char *error) {
  uint64_t hash = tj_fnv1a(key, strlen(key), TJ_FNV_SEED);
  *out = NULL;
  pthread_mutex_lock(&c->lock);
  RtEntry *e = find(c, key, hash);
  if (e) return wait_for(c, e, out, error);
  e = tj_alloc(sizeof *e);
  if (!e || !(e->key = tj_strdup(key))) {
    free(e);
    pthread_mutex_unlock(&c->lock);
    snprintf(error, RT_ERROR_MAX, "kernel cache: out of memory");
    return TJ_ERR_OUT_OF_MEMORY;
  }
  e->hash = hash;
  e->state = ENTRY_PENDING;
  atomic_init(&e->refs, 1);
  link_entry(c, e);
  c->misses++;
  pthread_mutex_unlock(&c->lock);
  return run_compile(c, e, compile, arg, out, error);
}

/* ---------------------------------------------------- references, stats */

void *rt_entry_value(const RtEntry *e) { return e->value; }

void rt_entry_retain(RtEntry *e) { atomic_fetch_add_explicit(&e->refs, 1, memory_order_relaxed); }

void rt_entry_release(RtEntry *e) { atomic_fetch_sub_explicit(&e->refs, 1, memory_order_release); }

void rt_cache_pin(RtCache *c, RtEntry *e) {
  pthread_mutex_lock(&c->lock);
  e->pinned = true;
  pthread_mutex_unlock(&c->lock);
}

void rt_cache_count_hit(RtCache *c) {
  atomic_fetch_add_explicit(&c->hits, 1, memory_order_relaxed);
}

void rt_cache_stats(RtCache *c, tj_cache_stats *out) {
  pthread_mutex_lock(&c->lock);
  out->hits = atomic_load(&c->hits);
  out->misses = c->misses;
  out->evictions = c->evictions;
  out->failures = c->failures;
  out->entries = c->count;
  out->capacity = c->capacity;
  out->codegen_us = c->codegen_us;
  out->jit_ms = c->jit_ms;
  pthread_mutex_unlock(&c->lock);
}
