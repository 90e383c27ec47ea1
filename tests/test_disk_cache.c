/*
 * test_disk_cache.c — the kernel cache on disk (src/runtime/disk_cache.c)
 * with made-up blobs standing for compiled kernels: no GPU, no driver.
 *
 *   - a blob stored under a key comes back byte for byte; the directory
 *     (and the parents it needed) is created 0700, files 0600;
 *   - 8 processes storing and loading one key at once leave one valid file
 *     and no temporary files, and no reader ever sees a torn file;
 *   - 8 threads sharing one handle (for ThreadSanitizer);
 *   - corrupt, truncated, extended, wrong-key, foreign-owned, group- or
 *     world-writable and symlinked files are all rejected, and a store
 *     rewrites them; an untrusted directory disables the cache;
 *   - trimming removes the oldest files first, and a hit makes a file new;
 *   - TILEJIT_CACHE_DISABLE, TILEJIT_CACHE_DIR, XDG_CACHE_HOME, HOME and
 *     TILEJIT_CACHE_MAX_BYTES pick the directory and the bound;
 *   - a kernel's blob (kernel_image.c) encodes and decodes, malformed ones
 *     are refused, and the disk key names the driver and the device but no
 *     context.
 * CI runs as root, so the foreign owner is real (chown); elsewhere the test
 * hook rt_disk_trust_uid stands in for it.
 */
#define _GNU_SOURCE /* mkdtemp, nftw's FTW_PHYS, futimens */

#include "runtime/runtime.h"

#include "support.h"

#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define KEY       "tilejit 0.1.0|softmax#00ff|DTYPE=f32|BLOCK=1024|sm_90|isa=0|ptx|ctx=0|driver=13000"
#define OTHER_UID 54321u
#define RACERS    8
#define ROUNDS    30

/* ------------------------------------------------------------ helpers */

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(path);
}

typedef struct Scratch {
  char base[256]; /* a fresh directory, removed at the end */
  char dir[320];  /* the cache directory inside it (not created) */
} Scratch;

static void scratch_open(Scratch *s) {
  const char *tmp = getenv("TMPDIR");
  snprintf(s->base, sizeof s->base, "%s/tj-disk-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  ck_assert_ptr_nonnull(mkdtemp(s->base));
  snprintf(s->dir, sizeof s->dir, "%s/cache", s->base);
}

static void scratch_close(Scratch *s) { nftw(s->base, remove_entry, 16, FTW_DEPTH | FTW_PHYS); }

static void file_path(const Scratch *s, const char *key, char *out, size_t size) {
  char name[64];
  rt_disk_file_name(key, name, sizeof name);
  snprintf(out, size, "%s/%s", s->dir, name);
}

/* A blob of size bytes made from seed. */
static unsigned char *make_blob(int seed, size_t size) {
  unsigned char *b = malloc(size);
  ck_assert_ptr_nonnull(b);
  for (size_t i = 0; i < size; i++) b[i] = (unsigned char)(seed * 31 + i * 7);
  return b;
}

static bool blob_is(const void *got, size_t got_size, int seed, size_t size) {
  unsigned char *want = make_blob(seed, size);
  bool same = got_size == size && memcmp(got, want, size) == 0;
  free(want);
  return same;
}

static void store(RtDisk *d, const char *key, int seed, size_t size) {
  unsigned char *b = make_blob(seed, size);
  ck_assert_msg(rt_disk_store(d, key, b, size), "store %s: %s", key, rt_disk_status(d));
  free(b);
}

/* Loads key: true when it hits, and then it must be the blob of seed. */
static bool load_is(RtDisk *d, const char *key, int seed, size_t size) {
  void *blob;
  size_t got;
  if (!rt_disk_load(d, key, &blob, &got)) return false;
  ck_assert_msg(blob_is(blob, got, seed, size), "%s: a hit with the wrong bytes", key);
  free(blob);
  return true;
}

static RtDiskStats stats_of(const RtDisk *d) {
  RtDiskStats s;
  rt_disk_stats(d, &s);
  return s;
}

/* Files in dir: cache files, and temporary ones. */
static void count_files(const char *dir, int *cache, int *temp) {
  DIR *dp = opendir(dir);
  ck_assert_ptr_nonnull(dp);
  *cache = *temp = 0;
  for (struct dirent *e; (e = readdir(dp));) {
    size_t n = strlen(e->d_name);
    if (n > 4 && strcmp(e->d_name + n - 4, ".tjc") == 0) ++*cache;
    if (strncmp(e->d_name, ".tmp-", 5) == 0) ++*temp;
  }
  closedir(dp);
}

static mode_t mode_of(const char *path) {
  struct stat st;
  ck_assert_int_eq(lstat(path, &st), 0);
  return st.st_mode & 07777;
}

/* ------------------------------------------------------------- basics */

START_TEST(store_then_load_gives_the_same_bytes) {
  Scratch s;
  scratch_open(&s);
  char nested[400], path[512];
  snprintf(nested, sizeof nested, "%s/a/b/tilejit", s.base);
  RtDisk *d = rt_disk_open(nested, 1 << 20);
  ck_assert_msg(rt_disk_enabled(d), "%s", rt_disk_status(d));
  ck_assert_str_eq(rt_disk_status(d), "enabled");
  ck_assert_uint_eq(mode_of(nested), 0700);
  snprintf(path, sizeof path, "%s/a", s.base);
  ck_assert_uint_eq(mode_of(path), 0700);
  ck_assert(!load_is(d, KEY, 1, 5000));
  store(d, KEY, 1, 5000);
  ck_assert(load_is(d, KEY, 1, 5000));
  store(d, "", 2, 0); /* empty key, empty blob */
  ck_assert(load_is(d, "", 2, 0));
  char name[64];
  rt_disk_file_name(KEY, name, sizeof name);
  snprintf(path, sizeof path, "%s/%s", nested, name);
  ck_assert_uint_eq(mode_of(path), 0600);
  RtDiskStats st = stats_of(d);
  ck_assert_uint_eq(st.hits, 2);
  ck_assert_uint_eq(st.misses, 1);
  ck_assert_uint_eq(st.writes, 2);
  ck_assert_uint_eq(st.rejects, 0);
  ck_assert_uint_eq(st.errors, 0);
  rt_disk_close(d);
  rt_disk_close(NULL);
  scratch_close(&s);
}
END_TEST

START_TEST(a_null_or_unnamed_cache_is_disabled) {
  void *blob;
  size_t size;
  ck_assert(!rt_disk_enabled(NULL));
  ck_assert(!rt_disk_load(NULL, KEY, &blob, &size));
  ck_assert(!rt_disk_store(NULL, KEY, "x", 1));
  RtDisk *d = rt_disk_open("", 1 << 20);
  ck_assert(!rt_disk_enabled(d));
  ck_assert(!rt_disk_store(d, KEY, "x", 1));
  ck_assert(!rt_disk_load(d, KEY, &blob, &size));
  ck_assert_ptr_null(blob);
  ck_assert_uint_eq(stats_of(d).misses, 0); /* a disabled cache counts no lookups */
  rt_disk_close(d);
}
END_TEST

/* --------------------------------------------------------------- races */

/* A racer: waits for the start, then stores its own blob under KEY and
 * loads it back ROUNDS times; every hit must be some racer's whole blob. */
static int racer(const char *dir, int seed, int start_fd) {
  char go;
  if (read(start_fd, &go, 1) != 1) return 2;
  RtDisk *d = rt_disk_open(dir, 1 << 24);
  if (!rt_disk_enabled(d)) return 3;
  unsigned char *mine = make_blob(seed, 1000 + 97 * (size_t)seed);
  for (int r = 0; r < ROUNDS; r++) {
    if (!rt_disk_store(d, KEY, mine, 1000 + 97 * (size_t)seed)) return 4;
    void *blob;
    size_t size;
    if (!rt_disk_load(d, KEY, &blob, &size)) return 5; /* someone's file is always there */
    int who = (int)(size - 1000) / 97;
    bool whole =
        size >= 1000 && (size - 1000) % 97 == 0 && who < RACERS && blob_is(blob, size, who, size);
    free(blob);
    if (!whole) return 6;
  }
  free(mine);
  rt_disk_close(d);
  return 0;
}

START_TEST(racing_processes_leave_one_valid_file) {
  Scratch s;
  scratch_open(&s);
  RtDisk *d = rt_disk_open(s.dir, 1 << 24);
  ck_assert(rt_disk_enabled(d));
  int start[2];
  ck_assert_int_eq(pipe(start), 0);
  pid_t pids[RACERS];
  for (int i = 0; i < RACERS; i++) {
    fflush(NULL);
    pids[i] = fork();
    ck_assert_int_ge(pids[i], 0);
    if (pids[i] == 0) {
      close(start[1]);
      _exit(racer(s.dir, i, start[0]));
    }
  }
  close(start[0]);
  char go[RACERS] = {0};
  ck_assert_int_eq(write(start[1], go, RACERS), RACERS); /* everyone at once */
  close(start[1]);
  for (int i = 0; i < RACERS; i++) {
    int status = 0;
    ck_assert_int_eq(waitpid(pids[i], &status, 0), pids[i]);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "racer %d: status %d", i, status);
  }
  int cache, temp;
  count_files(s.dir, &cache, &temp);
  ck_assert_int_eq(cache, 1);
  ck_assert_int_eq(temp, 0);
  void *blob;
  size_t size;
  ck_assert(rt_disk_load(d, KEY, &blob, &size));
  int who = (int)(size - 1000) / 97;
  ck_assert(who >= 0 && who < RACERS && blob_is(blob, size, who, size));
  free(blob);
  rt_disk_close(d);
  scratch_close(&s);
}
END_TEST

typedef struct Sharer {
  pthread_t thread;
  RtDisk *disk;
  int index;
  int bad;
} Sharer;

static void *share(void *arg) {
  Sharer *w = arg;
  for (int r = 0; r < 20; r++) {
    int k = (w->index + r) % 4;
    char key[32];
    snprintf(key, sizeof key, "key %d", k);
    unsigned char *b = make_blob(k, 300 + (size_t)k);
    if (!rt_disk_store(w->disk, key, b, 300 + (size_t)k)) w->bad++;
    free(b);
    void *blob;
    size_t size;
    if (!rt_disk_load(w->disk, key, &blob, &size) || !blob_is(blob, size, k, 300 + (size_t)k))
      w->bad++;
    free(blob);
  }
  return NULL;
}

START_TEST(threads_share_one_handle) {
  Scratch s;
  scratch_open(&s);
  RtDisk *d = rt_disk_open(s.dir, 1 << 24);
  Sharer w[8];
  for (int i = 0; i < 8; i++) {
    w[i] = (Sharer){.disk = d, .index = i};
    ck_assert_int_eq(pthread_create(&w[i].thread, NULL, share, &w[i]), 0);
  }
  for (int i = 0; i < 8; i++) {
    pthread_join(w[i].thread, NULL);
    ck_assert_int_eq(w[i].bad, 0);
  }
  RtDiskStats st = stats_of(d);
  ck_assert_uint_eq(st.writes, 8 * 20);
  ck_assert_uint_eq(st.hits, 8 * 20);
  int cache, temp;
  count_files(s.dir, &cache, &temp);
  ck_assert_int_eq(cache, 4);
  ck_assert_int_eq(temp, 0);
  rt_disk_close(d);
  scratch_close(&s);
}
END_TEST

/* ------------------------------------------------------- bad files */

/* Stores KEY, damages its file with damage(path), checks the load is a
 * reject, then that a store rewrites the file and it loads again. */
static void check_rejected(void (*damage)(const char *path, RtDisk *d), const char *what) {
  Scratch s;
  scratch_open(&s);
  RtDisk *d = rt_disk_open(s.dir, 1 << 20);
  char path[512];
  file_path(&s, KEY, path, sizeof path);
  store(d, KEY, 3, 2000);
  damage(path, d);
  ck_assert_msg(!load_is(d, KEY, 3, 2000), "%s: loaded", what);
  RtDiskStats st = stats_of(d);
  ck_assert_msg(st.rejects == 1 && st.misses == 1 && st.hits == 0, "%s: rejects %llu misses %llu",
                what, (unsigned long long)st.rejects, (unsigned long long)st.misses);
  rt_disk_trust_uid(d, (unsigned)geteuid());
  store(d, KEY, 3, 2000);
  ck_assert_msg(load_is(d, KEY, 3, 2000), "%s: not rewritten", what);
  rt_disk_close(d);
  scratch_close(&s);
}

static void flip_byte(const char *path, off_t at) {
  int fd = open(path, O_RDWR);
  ck_assert_int_ge(fd, 0);
  unsigned char c;
  ck_assert_int_eq(pread(fd, &c, 1, at), 1);
  c ^= 0x40;
  ck_assert_int_eq(pwrite(fd, &c, 1, at), 1);
  close(fd);
}

static off_t size_of(const char *path) {
  struct stat st;
  ck_assert_int_eq(stat(path, &st), 0);
  return st.st_size;
}

static void corrupt_payload(const char *path, RtDisk *d) {
  (void)d;
  flip_byte(path, size_of(path) - 100);
}
static void corrupt_header(const char *path, RtDisk *d) {
  (void)d;
  flip_byte(path, 9); /* the key length */
}
static void corrupt_magic(const char *path, RtDisk *d) {
  (void)d;
  flip_byte(path, 0);
}
static void truncate_by_one(const char *path, RtDisk *d) {
  (void)d;
  ck_assert_int_eq(truncate(path, size_of(path) - 1), 0);
}
static void truncate_to_header(const char *path, RtDisk *d) {
  (void)d;
  ck_assert_int_eq(truncate(path, 20), 0);
}
static void truncate_to_nothing(const char *path, RtDisk *d) {
  (void)d;
  ck_assert_int_eq(truncate(path, 0), 0);
}
static void extend_by_one(const char *path, RtDisk *d) {
  (void)d;
  ck_assert_int_eq(truncate(path, size_of(path) + 1), 0);
}
static void world_writable(const char *path, RtDisk *d) {
  (void)d;
  ck_assert_int_eq(chmod(path, 0602), 0);
}
static void group_writable(const char *path, RtDisk *d) {
  (void)d;
  ck_assert_int_eq(chmod(path, 0620), 0);
}

/* Replaces the file with a symbolic link to a valid copy of it. */
static void symlinked(const char *path, RtDisk *d) {
  (void)d;
  char copy[600];
  snprintf(copy, sizeof copy, "%s.copy", path);
  ck_assert_int_eq(rename(path, copy), 0);
  ck_assert_int_eq(symlink(copy, path), 0);
}

/* Another user's file: chown where we may (root, as in CI), else the hook. */
static void foreign_owner(const char *path, RtDisk *d) {
  if (geteuid() == 0)
    ck_assert_int_eq(chown(path, OTHER_UID, OTHER_UID), 0);
  else
    rt_disk_trust_uid(d, OTHER_UID);
}

/* The file of another key moved to KEY's name (a hash collision). */
static void other_key(const char *path, RtDisk *d) {
  unsigned char *b = make_blob(3, 2000);
  ck_assert(rt_disk_store(d, "another key", b, 2000));
  free(b);
  char other[512], name[64];
  rt_disk_file_name("another key", name, sizeof name);
  snprintf(other, sizeof other, "%.*s/%s", (int)(strrchr(path, '/') - path), path, name);
  ck_assert_int_eq(rename(other, path), 0);
}

START_TEST(bad_files_are_rejected_and_rewritten) {
  check_rejected(corrupt_payload, "corrupt payload");
  check_rejected(corrupt_header, "corrupt key length");
  check_rejected(corrupt_magic, "corrupt magic");
  check_rejected(truncate_by_one, "truncated by a byte");
  check_rejected(truncate_to_header, "truncated in the header");
  check_rejected(truncate_to_nothing, "empty");
  check_rejected(extend_by_one, "a byte too long");
  check_rejected(world_writable, "world-writable");
  check_rejected(group_writable, "group-writable");
  check_rejected(symlinked, "a symbolic link");
  check_rejected(foreign_owner, "another user's");
  check_rejected(other_key, "another key");
}
END_TEST

START_TEST(foreign_owner_through_the_hook) {
  /* Whatever the user: the owner check compares with the trusted uid. */
  Scratch s;
  scratch_open(&s);
  RtDisk *d = rt_disk_open(s.dir, 1 << 20);
  store(d, KEY, 4, 100);
  rt_disk_trust_uid(d, OTHER_UID);
  ck_assert(!load_is(d, KEY, 4, 100));
  ck_assert_uint_eq(stats_of(d).rejects, 1);
  rt_disk_close(d);
  scratch_close(&s);
}
END_TEST

START_TEST(untrusted_directories_disable_the_cache) {
  Scratch s;
  scratch_open(&s);
  ck_assert_int_eq(mkdir(s.dir, 0700), 0);
  ck_assert_int_eq(chmod(s.dir, 0777), 0);
  RtDisk *d = rt_disk_open(s.dir, 1 << 20);
  ck_assert(!rt_disk_enabled(d));
  ck_assert_msg(strstr(rt_disk_status(d), "writable by group or others"), "%s", rt_disk_status(d));
  ck_assert_uint_eq(stats_of(d).errors, 1);
  ck_assert(!rt_disk_store(d, KEY, "x", 1));
  rt_disk_close(d);
  ck_assert_int_eq(chmod(s.dir, 0770), 0);
  d = rt_disk_open(s.dir, 1 << 20);
  ck_assert(!rt_disk_enabled(d));
  rt_disk_close(d);
  ck_assert_int_eq(chmod(s.dir, 0755), 0); /* readable by others is fine */
  d = rt_disk_open(s.dir, 1 << 20);
  ck_assert(rt_disk_enabled(d));
  rt_disk_close(d);
  if (geteuid() == 0) {
    ck_assert_int_eq(chown(s.dir, OTHER_UID, OTHER_UID), 0);
    d = rt_disk_open(s.dir, 1 << 20);
    ck_assert(!rt_disk_enabled(d));
    ck_assert_msg(strstr(rt_disk_status(d), "owned by uid"), "%s", rt_disk_status(d));
    rt_disk_close(d);
  }
  char file[400];
  snprintf(file, sizeof file, "%s/plain-file", s.base);
  ck_assert_int_eq(close(open(file, O_CREAT | O_WRONLY, 0600)), 0);
  d = rt_disk_open(file, 1 << 20); /* not a directory */
  ck_assert(!rt_disk_enabled(d));
  rt_disk_close(d);
  scratch_close(&s);
}
END_TEST

/* ------------------------------------------------------------ trimming */

static void set_age(const Scratch *s, const char *key, int seconds_ago) {
  char path[512];
  file_path(s, key, path, sizeof path);
  struct timespec t[2];
  clock_gettime(CLOCK_REALTIME, &t[0]);
  t[0].tv_sec -= seconds_ago;
  t[1] = t[0];
  ck_assert_int_eq(utimensat(AT_FDCWD, path, t, 0), 0);
}

static bool present(const Scratch *s, const char *key) {
  char path[512];
  file_path(s, key, path, sizeof path);
  return access(path, F_OK) == 0;
}

START_TEST(trimming_removes_the_oldest_first) {
  Scratch s;
  scratch_open(&s);
  /* Each file is 32 + 5 + 1000 bytes: three fit in 3200, four do not. */
  RtDisk *d = rt_disk_open(s.dir, 3200);
  store(d, "key 0", 0, 1000);
  store(d, "key 1", 1, 1000);
  store(d, "key 2", 2, 1000);
  set_age(&s, "key 0", 300);
  set_age(&s, "key 1", 200);
  set_age(&s, "key 2", 100);
  store(d, "key 3", 3, 1000);
  ck_assert(!present(&s, "key 0"));
  ck_assert(present(&s, "key 1") && present(&s, "key 2") && present(&s, "key 3"));
  /* A hit makes key 1 the newest: key 2 goes next. */
  set_age(&s, "key 3", 50);
  ck_assert(load_is(d, "key 1", 1, 1000));
  store(d, "key 4", 4, 1000);
  ck_assert(!present(&s, "key 2"));
  ck_assert(present(&s, "key 1") && present(&s, "key 3") && present(&s, "key 4"));
  /* A blob over the bound is not stored, and removes nothing. */
  unsigned char *big = make_blob(9, 4000);
  ck_assert(!rt_disk_store(d, "key 9", big, 4000));
  free(big);
  ck_assert(present(&s, "key 1") && present(&s, "key 3") && present(&s, "key 4"));
  /* Files that are not the cache's are never touched. */
  char other[400];
  snprintf(other, sizeof other, "%s/notes.txt", s.dir);
  FILE *f = fopen(other, "w");
  ck_assert_ptr_nonnull(f);
  for (int i = 0; i < 5000; i++) fputc('x', f);
  fclose(f);
  store(d, "key 5", 5, 1000);
  ck_assert_int_eq(access(other, F_OK), 0);
  rt_disk_close(d);
  scratch_close(&s);
}
END_TEST

START_TEST(stale_temporary_files_are_removed) {
  Scratch s;
  scratch_open(&s);
  RtDisk *d = rt_disk_open(s.dir, 1 << 20);
  char fresh[400], stale[400];
  snprintf(fresh, sizeof fresh, "%s/.tmp-1-fresh", s.dir);
  snprintf(stale, sizeof stale, "%s/.tmp-1-stale", s.dir);
  ck_assert_int_eq(close(open(fresh, O_CREAT | O_WRONLY, 0600)), 0);
  ck_assert_int_eq(close(open(stale, O_CREAT | O_WRONLY, 0600)), 0);
  struct timespec t[2] = {{time(NULL) - 7200, 0}, {time(NULL) - 7200, 0}};
  ck_assert_int_eq(utimensat(AT_FDCWD, stale, t, 0), 0);
  store(d, KEY, 1, 10);
  ck_assert_int_eq(access(fresh, F_OK), 0); /* maybe another process's write */
  ck_assert_int_ne(access(stale, F_OK), 0);
  rt_disk_close(d);
  scratch_close(&s);
}
END_TEST

/* ------------------------------------------------------- environment */

static void clear_env(void) {
  unsetenv(RT_CACHE_DISABLE_ENV);
  unsetenv(RT_CACHE_DIR_ENV);
  unsetenv(RT_CACHE_MAX_ENV);
  unsetenv("XDG_CACHE_HOME");
}

START_TEST(the_environment_picks_directory_bound_and_switch) {
  Scratch s;
  scratch_open(&s);
  char *home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
  clear_env();
  setenv(RT_CACHE_DIR_ENV, s.dir, 1);
  setenv(RT_CACHE_DISABLE_ENV, "1", 1);
  RtDisk *d = rt_disk_open_env();
  ck_assert(!rt_disk_enabled(d));
  ck_assert_msg(strstr(rt_disk_status(d), RT_CACHE_DISABLE_ENV), "%s", rt_disk_status(d));
  ck_assert(!rt_disk_store(d, KEY, "x", 1));
  ck_assert_int_ne(access(s.dir, F_OK), 0); /* not even created */
  rt_disk_close(d);

  setenv(RT_CACHE_DISABLE_ENV, "0", 1);
  d = rt_disk_open_env();
  ck_assert(rt_disk_enabled(d));
  ck_assert_str_eq(rt_disk_dir(d), s.dir);
  rt_disk_close(d);

  setenv(RT_CACHE_MAX_ENV, "0", 1);
  d = rt_disk_open_env();
  ck_assert(!rt_disk_enabled(d));
  rt_disk_close(d);
  setenv(RT_CACHE_MAX_ENV, "100", 1);
  d = rt_disk_open_env();
  unsigned char *b = make_blob(1, 200);
  ck_assert(!rt_disk_store(d, KEY, b, 200)); /* over the bound */
  free(b);
  rt_disk_close(d);

  char want[512];
  clear_env();
  setenv("XDG_CACHE_HOME", s.base, 1);
  d = rt_disk_open_env();
  snprintf(want, sizeof want, "%s/tilejit", s.base);
  ck_assert_str_eq(rt_disk_dir(d), want);
  ck_assert(rt_disk_enabled(d));
  ck_assert_uint_eq(mode_of(want), 0700);
  rt_disk_close(d);

  clear_env();
  setenv("HOME", s.base, 1);
  d = rt_disk_open_env();
  snprintf(want, sizeof want, "%s/.cache/tilejit", s.base);
  ck_assert_str_eq(rt_disk_dir(d), want);
  ck_assert(rt_disk_enabled(d));
  rt_disk_close(d);

  if (home) setenv("HOME", home, 1);
  free(home);
  scratch_close(&s);
}
END_TEST

/* -------------------------------------------------------- kernel blobs */

static RtImage sample_image(unsigned char *cubin, size_t size) {
  RtImage im;
  memset(&im, 0, sizeof im);
  snprintf(im.info.entry, sizeof im.info.entry, "tj_softmax");
  im.info.shape = (tj_launch_shape){128, 4, 1, 1, 0, 0, 0, 0, 70000};
  im.info.arch = 90;
  im.info.ptx_version = 78;
  im.info.param_count = 5;
  im.param_count = 6;
  im.hidden_count = 1;
  const uint8_t kinds[] = {RT_PARAM_B64, RT_PARAM_B64, RT_PARAM_B64,
                           RT_PARAM_B64, RT_PARAM_I32, RT_PARAM_B64};
  memcpy(im.param_kind, kinds, sizeof kinds);
  im.log = "ptxas info    : Used 20 registers";
  for (size_t i = 0; i < size; i++) cubin[i] = (unsigned char)(i * 13);
  im.cubin = cubin;
  im.cubin_size = size;
  return im;
}

START_TEST(kernel_blobs_round_trip) {
  unsigned char cubin[777];
  RtImage in = sample_image(cubin, sizeof cubin), out;
  size_t size = 0;
  unsigned char *blob = rt_image_encode(&in, &size);
  ck_assert_ptr_nonnull(blob);
  ck_assert(rt_image_decode(blob, size, &out));
  ck_assert_str_eq(out.info.entry, "tj_softmax");
  ck_assert_int_eq(memcmp(&out.info.shape, &in.info.shape, sizeof in.info.shape), 0);
  ck_assert_int_eq(out.info.arch, 90);
  ck_assert_int_eq(out.info.ptx_version, 78);
  ck_assert_int_eq(out.info.param_count, 5);
  ck_assert_int_eq(out.param_count, 6);
  ck_assert_int_eq(out.hidden_count, 1);
  ck_assert_int_eq(memcmp(out.param_kind, in.param_kind, 6), 0);
  ck_assert_str_eq(out.log, in.log);
  ck_assert_uint_eq(out.cubin_size, sizeof cubin);
  ck_assert_int_eq(memcmp(out.cubin, cubin, sizeof cubin), 0);
  /* Any shorter blob, or one a byte longer, is refused. */
  for (size_t cut = 0; cut < size; cut += cut < 200 ? 1 : 50)
    ck_assert_msg(!rt_image_decode(blob, cut, &out), "decoded %zu of %zu bytes", cut, size);
  unsigned char *longer = malloc(size + 1);
  memcpy(longer, blob, size);
  longer[size] = 0;
  ck_assert(!rt_image_decode(longer, size + 1, &out));
  free(longer);
  blob[0] ^= 1; /* magic */
  ck_assert(!rt_image_decode(blob, size, &out));
  free(blob);
  in.param_count = 7; /* inconsistent with info.param_count + hidden */
  blob = rt_image_encode(&in, &size);
  ck_assert(!rt_image_decode(blob, size, &out));
  free(blob);
}
END_TEST

START_TEST(the_disk_key_names_driver_and_device_not_context) {
  tj_context ctx;
  memset(&ctx, 0, sizeof ctx);
  ctx.info.driver_version = 13000;
  ctx.info.arch = 90;
  ctx.id = 77;
  RtKeyParts parts = {.arch = 90, .ptx_version = 0, .backend = TJ_BACKEND_PTX, .context_id = 77};
  char *a = rt_disk_key(&ctx, "spec", &parts);
  char want[256];
  snprintf(want, sizeof want, "spec|sm_90|isa=0|ptx|ctx=0|src=%s|driver=13000|device=sm_90",
           tj_source_hash);
  ck_assert_str_eq(a, want);
  ck_assert_uint_eq(strlen(tj_source_hash), 16);
  parts.context_id = 78;
  char *b = rt_disk_key(&ctx, "spec", &parts);
  ck_assert_str_eq(a, b); /* any context */
  ctx.info.driver_version = 12080;
  char *c = rt_disk_key(&ctx, "spec", &parts);
  ctx.info.driver_version = 13000;
  ctx.info.arch = 100; /* the same PTX target on another device */
  char *e = rt_disk_key(&ctx, "spec", &parts);
  ck_assert_str_ne(a, c);
  ck_assert_str_ne(a, e);
  free(a), free(b), free(c), free(e);
}
END_TEST

static Suite *disk_cache_suite(void) {
  Suite *s = suite_create("disk_cache");
  TCase *tc = tcase_create("disk_cache");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, store_then_load_gives_the_same_bytes);
  tcase_add_test(tc, a_null_or_unnamed_cache_is_disabled);
  tcase_add_test(tc, racing_processes_leave_one_valid_file);
  tcase_add_test(tc, threads_share_one_handle);
  tcase_add_test(tc, bad_files_are_rejected_and_rewritten);
  tcase_add_test(tc, foreign_owner_through_the_hook);
  tcase_add_test(tc, untrusted_directories_disable_the_cache);
  tcase_add_test(tc, trimming_removes_the_oldest_first);
  tcase_add_test(tc, stale_temporary_files_are_removed);
  tcase_add_test(tc, the_environment_picks_directory_bound_and_switch);
  tcase_add_test(tc, kernel_blobs_round_trip);
  tcase_add_test(tc, the_disk_key_names_driver_and_device_not_context);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return test_run_suite(disk_cache_suite()); }
