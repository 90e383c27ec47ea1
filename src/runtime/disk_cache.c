/*
 * disk_cache.c — a directory of opaque byte blobs, each stored under a key
 * string, shared by every process of the user: the kernel cache on disk.
 *
 * Nothing here knows CUDA or kernels: a blob goes in and comes out, so
 * tests/test_disk_cache.c drives this file with made-up blobs and no driver
 * (kernel_image.c decides what a kernel's blob holds).
 *
 * A file is named after two 64-bit hashes of its key ("<32 hex>.tjc") and
 * holds a 32-byte header (magic, format, key and payload lengths, a
 * checksum of key and payload), the key, then the payload. A lookup reads
 * it back only when it is a regular file owned by the effective user and
 * writable by nobody else, its length is exactly what the header says, the
 * checksum matches and the stored key is the key asked for; anything else
 * is a reject, a miss the next store replaces. A store writes a temporary
 * file of its own and renames it over the name, so a reader sees a whole
 * file or none, whatever number of processes store the same key at once.
 * After a store the directory is trimmed to max_bytes, oldest first (a hit
 * refreshes a file's time).
 *
 * The directory is created 0700 and trusted only when it is a directory
 * owned by the effective user and writable by neither group nor others; an
 * untrusted directory disables the cache. Every file operation goes through
 * the directory's descriptor, opened once and checked then. Failures never
 * reach the caller beyond a false return and the counters: the compile
 * goes on without the disk. A handle is used by any number of threads: it
 * never changes after rt_disk_open but for its atomic counters.
 */
#include "runtime/runtime.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAGIC           "TJDC"
#define FORMAT          1u
#define HEADER_BYTES    32
#define MAX_KEY_BYTES   ((uint64_t)1 << 20)
#define MAX_BLOB_BYTES  ((uint64_t)1 << 28)
#define SUFFIX          ".tjc"
#define TEMP_PREFIX     ".tmp-"
#define STALE_TEMP_SECS 3600 /* a writer that died left it */
#define NAME_SEED_2     0x9ae16a3b2f90404full

struct RtDisk {
  int dirfd; /* -1: disabled */
  uint64_t max_bytes;
  unsigned uid; /* whose files are trusted */
  char why[256];
  char *dir;
  atomic_uint_fast64_t hits, misses, writes, rejects, errors, temp_serial;
};

/* ------------------------------------------------------------ opening */

static RtDisk *new_disk(const char *dir, uint64_t max_bytes) {
  RtDisk *d = tj_alloc(sizeof *d);
  if (!d) return NULL;
  d->dirfd = -1;
  d->max_bytes = max_bytes;
  d->uid = (unsigned)geteuid();
  d->dir = tj_strdup(dir ? dir : "");
  if (!d->dir) {
    free(d);
    return NULL;
  }
  return d;
}

/* mkdir -p with mode 0700 for what it creates. */
static bool make_dirs(const char *path) {
  char *p = tj_strdup(path);
  if (!p) return false;
  for (char *s = p + 1; *s; s++) {
    if (*s != '/') continue;
    *s = '\0';
    if (mkdir(p, 0700) != 0 && errno != EEXIST) break;
    *s = '/';
  }
  bool ok = mkdir(p, 0700) == 0 || errno == EEXIST;
  free(p);
  return ok;
}

/* Opens the directory and checks it through its descriptor. */
static void open_dir(RtDisk *d) {
  struct stat st;
  if (!make_dirs(d->dir)) {
    snprintf(d->why, sizeof d->why, "cannot create the directory: %s", strerror(errno));
    return;
  }
  int fd = open(d->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0 || fstat(fd, &st) != 0) {
    snprintf(d->why, sizeof d->why, "cannot open the directory: %s", strerror(errno));
  } else if (st.st_uid != d->uid) {
    snprintf(d->why, sizeof d->why, "not trusted: owned by uid %u, not %u", (unsigned)st.st_uid,
             d->uid);
  } else if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    snprintf(d->why, sizeof d->why, "not trusted: writable by group or others (mode %03o)",
             (unsigned)(st.st_mode & 0777));
  } else {
    d->dirfd = fd;
    return;
  }
  if (fd >= 0) close(fd);
  atomic_fetch_add(&d->errors, 1);
}

RtDisk *rt_disk_open(const char *dir, uint64_t max_bytes) {
  RtDisk *d = new_disk(dir, max_bytes);
  if (!d) return NULL;
  if (!dir || !*dir)
    snprintf(d->why, sizeof d->why, "no directory (no %s, XDG_CACHE_HOME or HOME)",
             RT_CACHE_DIR_ENV);
  else if (max_bytes == 0)
    snprintf(d->why, sizeof d->why, "disabled: a size bound of 0 bytes");
  else
    open_dir(d);
  return d;
}

static bool env_set(const char *name) {
  const char *v = getenv(name);
  return v && *v && strcmp(v, "0") != 0;
}

RtDisk *rt_disk_open_env(void) {
  if (env_set(RT_CACHE_DISABLE_ENV)) {
    RtDisk *d = new_disk(NULL, 0);
    if (d) snprintf(d->why, sizeof d->why, "disabled by %s", RT_CACHE_DISABLE_ENV);
    return d;
  }
  int64_t max = (int64_t)RT_DISK_DEFAULT_MAX_BYTES;
  const char *m = getenv(RT_CACHE_MAX_ENV);
  if (m && *m && !tj_parse_decimal(m, 0, INT64_MAX, &max)) max = (int64_t)RT_DISK_DEFAULT_MAX_BYTES;
  const char *dir = getenv(RT_CACHE_DIR_ENV), *xdg = getenv("XDG_CACHE_HOME"),
             *home = getenv("HOME");
  TjBuf path;
  buf_init(&path);
  if (dir && *dir)
    buf_puts(&path, dir);
  else if (xdg && xdg[0] == '/')
    buf_printf(&path, "%s/tilejit", xdg);
  else if (home && home[0] == '/')
    buf_printf(&path, "%s/.cache/tilejit", home);
  char *text = buf_take(&path);
  RtDisk *d = rt_disk_open(text, (uint64_t)max);
  free(text);
  return d;
}

void rt_disk_close(RtDisk *d) {
  if (!d) return;
  if (d->dirfd >= 0) close(d->dirfd);
  free(d->dir);
  free(d);
}

bool rt_disk_enabled(const RtDisk *d) { return d && d->dirfd >= 0; }

const char *rt_disk_status(const RtDisk *d) {
  return !d ? "out of memory" : d->dirfd >= 0 ? "enabled" : d->why;
}

const char *rt_disk_dir(const RtDisk *d) { return d ? d->dir : ""; }

void rt_disk_trust_uid(RtDisk *d, unsigned uid) { d->uid = uid; }

void rt_disk_stats(const RtDisk *d, RtDiskStats *out) {
  memset(out, 0, sizeof *out);
  if (!d) return;
  out->hits = atomic_load(&d->hits);
  out->misses = atomic_load(&d->misses);
  out->writes = atomic_load(&d->writes);
  out->rejects = atomic_load(&d->rejects);
  out->errors = atomic_load(&d->errors);
}

void rt_disk_file_name(const char *key, char *out, size_t size) {
  size_t n = strlen(key);
  snprintf(out, size, "%016llx%016llx" SUFFIX, (unsigned long long)tj_fnv1a(key, n, TJ_FNV_SEED),
           (unsigned long long)tj_fnv1a(key, n, NAME_SEED_2));
}

/* ------------------------------------------------------- the file format */

/* A 64-bit checksum of data, eight bytes at a time in four independent
 * lanes (multiply, xor-shift), so a 100 KB cubin costs microseconds: it
 * finds damage, it does not resist forgery (the directory's permissions
 * do that). */
static uint64_t sum_words(const unsigned char *p, size_t n, uint64_t seed) {
  const uint64_t k = 0x9e3779b97f4a7c15ull;
  uint64_t lane[4] = {seed, seed ^ 1, seed ^ 2, seed ^ 3};
  size_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int j = 0; j < 4; j++) {
      uint64_t w;
      memcpy(&w, p + i + 8 * j, 8);
      lane[j] = (lane[j] ^ w) * k;
      lane[j] ^= lane[j] >> 29;
    }
  uint64_t h = tj_fnv1a(p + i, n - i, seed ^ n);
  for (int j = 0; j < 4; j++) h = (h ^ lane[j]) * k, h ^= h >> 31;
  return h;
}

static uint64_t checksum(const char *key, size_t key_len, const void *blob, size_t size) {
  return sum_words(blob, size, sum_words((const unsigned char *)key, key_len, TJ_FNV_SEED));
}

static void put_u32(unsigned char *at, uint32_t v) { memcpy(at, &v, sizeof v); }
static void put_u64(unsigned char *at, uint64_t v) { memcpy(at, &v, sizeof v); }
static uint32_t get_u32(const unsigned char *at) {
  uint32_t v;
  memcpy(&v, at, sizeof v);
  return v;
}
static uint64_t get_u64(const unsigned char *at) {
  uint64_t v;
  memcpy(&v, at, sizeof v);
  return v;
}

static void make_header(unsigned char *h, const char *key, const void *blob, size_t size) {
  size_t key_len = strlen(key);
  memcpy(h, MAGIC, 4);
  put_u32(h + 4, FORMAT);
  put_u64(h + 8, key_len);
  put_u64(h + 16, size);
  put_u64(h + 24, checksum(key, key_len, blob, size));
}

/* The payload's offset in a whole file, or 0 when the file is not key's. */
static size_t check_file(const unsigned char *f, size_t file_size, const char *key) {
  size_t key_len = strlen(key);
  if (file_size < HEADER_BYTES || memcmp(f, MAGIC, 4) != 0 || get_u32(f + 4) != FORMAT) return 0;
  uint64_t stored_key = get_u64(f + 8), size = get_u64(f + 16);
  if (stored_key != key_len || size > MAX_BLOB_BYTES || file_size != HEADER_BYTES + key_len + size)
    return 0;
  const char *k = (const char *)f + HEADER_BYTES;
  if (memcmp(k, key, key_len) != 0) return 0;
  if (get_u64(f + 24) != checksum(k, key_len, k + key_len, size)) return 0;
  return HEADER_BYTES + key_len;
}

/* ---------------------------------------------------------- I/O helpers */

static bool read_all(int fd, unsigned char *p, size_t n) {
  while (n > 0) {
    ssize_t got = read(fd, p, n);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got;
    n -= (size_t)got;
  }
  return true;
}

bool rt_write_all(int fd, const void *data, size_t n) {
  const unsigned char *p = data;
  while (n > 0) {
    ssize_t put = write(fd, p, n);
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) return false;
    p += put;
    n -= (size_t)put;
  }
  return true;
}

/* A file the cache may read: regular, ours, writable by nobody else. */
static bool trusted_file(const RtDisk *d, const struct stat *st) {
  return S_ISREG(st->st_mode) && st->st_uid == d->uid && !(st->st_mode & (S_IWGRP | S_IWOTH));
}

/* ------------------------------------------------------------- lookups */

/* The whole file of name when it is trusted (NULL otherwise; *absent when
 * there is none). */
static unsigned char *read_file(RtDisk *d, const char *name, size_t *size, bool *absent) {
  int fd = openat(d->dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  *absent = fd < 0 && errno == ENOENT;
  if (fd < 0) return NULL;
  struct stat st;
  unsigned char *f = NULL;
  if (fstat(fd, &st) == 0 && trusted_file(d, &st) && st.st_size >= HEADER_BYTES &&
      (uint64_t)st.st_size <= HEADER_BYTES + MAX_KEY_BYTES + MAX_BLOB_BYTES &&
      (f = malloc((size_t)st.st_size)) && read_all(fd, f, (size_t)st.st_size)) {
    *size = (size_t)st.st_size;
    futimens(fd, NULL); /* recently used: trimmed last */
  } else {
    free(f);
    f = NULL;
  }
  close(fd);
  return f;
}

bool rt_disk_load(RtDisk *d, const char *key, void **blob, size_t *size) {
  *blob = NULL;
  *size = 0;
  if (!rt_disk_enabled(d)) return false;
  char name[64];
  rt_disk_file_name(key, name, sizeof name);
  size_t file_size = 0;
  bool absent = false;
  unsigned char *f = read_file(d, name, &file_size, &absent);
  size_t at = f ? check_file(f, file_size, key) : 0;
  if (!at) {
    free(f);
    atomic_fetch_add(&d->misses, 1);
    if (!absent) atomic_fetch_add(&d->rejects, 1);
    return false;
  }
  *size = file_size - at;
  memmove(f, f + at, *size);
  *blob = f;
  atomic_fetch_add(&d->hits, 1);
  return true;
}

void rt_disk_count_reject(RtDisk *d) {
  if (!d) return;
  atomic_fetch_sub(&d->hits, 1);
  atomic_fetch_add(&d->misses, 1);
  atomic_fetch_add(&d->rejects, 1);
}

/* ------------------------------------------------------------- stores */

/* A new temporary file in the directory, opened for writing. */
static int open_temp(RtDisk *d, char *name, size_t size) {
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  for (int attempt = 0; attempt < 8; attempt++) {
    uint64_t serial = atomic_fetch_add(&d->temp_serial, 1);
    snprintf(name, size, TEMP_PREFIX "%ld-%llx-%llx-%lx", (long)getpid(),
             (unsigned long long)(uintptr_t)d, (unsigned long long)serial, (long)now.tv_nsec);
    int fd = openat(d->dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0 || errno != EEXIST) return fd;
  }
  return -1;
}

static void disk_trim(RtDisk *d);

bool rt_disk_store(RtDisk *d, const char *key, const void *blob, size_t size) {
  if (!rt_disk_enabled(d)) return false;
  size_t key_len = strlen(key);
  if (key_len > MAX_KEY_BYTES || size > MAX_BLOB_BYTES ||
      HEADER_BYTES + key_len + size > d->max_bytes)
    return false;
  unsigned char header[HEADER_BYTES];
  char temp[96], name[64];
  make_header(header, key, blob, size);
  rt_disk_file_name(key, name, sizeof name);
  int fd = open_temp(d, temp, sizeof temp);
  bool ok = fd >= 0 && rt_write_all(fd, header, sizeof header) &&
            rt_write_all(fd, key, key_len) && rt_write_all(fd, blob, size);
  if (fd >= 0 && close(fd) != 0) ok = false;
  if (ok) ok = renameat(d->dirfd, temp, d->dirfd, name) == 0;
  if (!ok && fd >= 0) unlinkat(d->dirfd, temp, 0);
  atomic_fetch_add(ok ? &d->writes : &d->errors, 1);
  if (ok) disk_trim(d);
  return ok;
}

/* ------------------------------------------------------------ trimming */

typedef struct Found {
  char name[64];
  uint64_t bytes;
  struct timespec mtime;
} Found;

static int oldest_first(const void *a, const void *b) {
  const Found *x = a, *y = b;
  if (x->mtime.tv_sec != y->mtime.tv_sec) return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
  if (x->mtime.tv_nsec != y->mtime.tv_nsec) return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
  return strcmp(x->name, y->name);
}

/* A cache file's name: 32 lowercase hex digits and the suffix. */
static bool cache_name(const char *name) {
  if (strlen(name) != 32 + strlen(SUFFIX) || strcmp(name + 32, SUFFIX) != 0) return false;
  for (int i = 0; i < 32; i++)
    if (!strchr("0123456789abcdef", name[i])) return false;
  return true;
}

/* Lists the cache files (and removes stale temporary files); -1 on error. */
static int list_files(RtDisk *d, Found **out, uint64_t *total) {
  /* A descriptor of its own: a dup would share the reading position with
   * other threads trimming through the same handle. */
  int fd = openat(d->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), count = 0, cap = 0;
  DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
  if (!dir) {
    if (fd >= 0) close(fd);
    return -1;
  }
  time_t now = time(NULL);
  *out = NULL;
  *total = 0;
  for (struct dirent *e; (e = readdir(dir));) {
    struct stat st;
    bool temp = strncmp(e->d_name, TEMP_PREFIX, strlen(TEMP_PREFIX)) == 0;
    if ((!temp && !cache_name(e->d_name)) ||
        fstatat(d->dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
      continue;
    if (temp) {
      if (now - st.st_mtime > STALE_TEMP_SECS) unlinkat(d->dirfd, e->d_name, 0);
      continue;
    }
    if (!tj_grow((void **)out, &cap, count + 1, sizeof **out)) break;
    Found *f = &(*out)[count++];
    memcpy(f->name, e->d_name, 32 + sizeof SUFFIX); /* cache_name: 36 characters */
    f->bytes = (uint64_t)st.st_size;
    f->mtime = st.st_mtim;
    *total += f->bytes;
  }
  closedir(dir);
  return count;
}

/* Deletes cache files, oldest first, until they total at most max_bytes. */
static void disk_trim(RtDisk *d) {
  if (!rt_disk_enabled(d)) return;
  Found *files;
  uint64_t total;
  int count = list_files(d, &files, &total);
  if (count < 0) {
    atomic_fetch_add(&d->errors, 1);
    return;
  }
  if (total > d->max_bytes) {
    qsort(files, (size_t)count, sizeof *files, oldest_first);
    for (int i = 0; i < count && total > d->max_bytes; i++)
      if (unlinkat(d->dirfd, files[i].name, 0) == 0 || errno == ENOENT) total -= files[i].bytes;
  }
  free(files);
}
