/*
 * support_corpus.c — reads the fixed fuzz corpus (support_corpus.h): every
 * .tj file of tests/corpus, its text and the outcome its first line expects.
 */
#define _POSIX_C_SOURCE 200809L

#include "support_corpus.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CORPUS_DIR TJ_SOURCE_DIR "/tests/corpus"
#define EXPECT     "# expect: "

static char *read_all(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *text = NULL;
  long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
  if (size >= 0 && fseek(f, 0, SEEK_SET) == 0 && (text = malloc((size_t)size + 1))) {
    *len = fread(text, 1, (size_t)size, f);
    text[*len] = '\0';
  }
  fclose(f);
  return text;
}

static char *dup_span(const char *s, size_t n) {
  char *d = malloc(n + 1);
  if (d) {
    memcpy(d, s, n);
    d[n] = '\0';
  }
  return d;
}

/* "# expect: STATUS[: FRAGMENT]" on the first line. */
static int read_expectation(TjCorpusCase *c) {
  if (strncmp(c->text, EXPECT, strlen(EXPECT)) != 0) return 0;
  const char *s = c->text + strlen(EXPECT), *end = strchr(s, '\n');
  if (!end) return 0;
  const char *colon = memchr(s, ':', (size_t)(end - s));
  c->status = dup_span(s, (size_t)((colon ? colon : end) - s));
  c->fragment = colon ? dup_span(colon + 2, (size_t)(end - colon - 2)) : dup_span("", 0);
  return c->status && c->fragment && (!colon || colon[1] == ' ');
}

static int by_name(const void *a, const void *b) {
  return strcmp(((const TjCorpusCase *)a)->name, ((const TjCorpusCase *)b)->name);
}

static int load_one(const char *name, TjCorpusCase *c) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", CORPUS_DIR, name);
  memset(c, 0, sizeof *c);
  c->name = dup_span(name, strlen(name));
  c->text = read_all(path, &c->len);
  if (c->name && c->text && read_expectation(c)) return 1;
  fprintf(stderr, "corpus: %s is unreadable or lacks its '" EXPECT "...' line\n", path);
  return 0;
}

int corpus_load(TjCorpusCase **cases) {
  DIR *dir = opendir(CORPUS_DIR);
  if (!dir) return fprintf(stderr, "corpus: cannot open %s\n", CORPUS_DIR), -1;
  TjCorpusCase *all = NULL;
  int count = 0, ok = 1;
  for (struct dirent *e; ok && (e = readdir(dir));) {
    size_t n = strlen(e->d_name);
    if (n < 4 || strcmp(e->d_name + n - 3, ".tj") != 0) continue;
    TjCorpusCase *grown = realloc(all, (size_t)(count + 1) * sizeof *all);
    ok = grown != NULL;
    if (ok) all = grown, ok = load_one(e->d_name, &all[count++]);
  }
  closedir(dir);
  if (!ok) return corpus_free(all, count), -1;
  qsort(all, (size_t)count, sizeof *all, by_name);
  *cases = all;
  return count;
}

void corpus_free(TjCorpusCase *cases, int count) {
  for (int i = 0; cases && i < count; i++) {
    free(cases[i].name);
    free(cases[i].text);
    free(cases[i].status);
    free(cases[i].fragment);
  }
  free(cases);
}
