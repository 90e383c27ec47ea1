/*
 * support_corpus.h — the fixed fuzz corpus, the .tj files of tests/corpus (support_corpus.c).
 *
 * Each file is a program text whose first line says what parsing it must
 * give, then comments on why it is there (hostile inputs that once gave a
 * wrong result without an error, kept so that they stay fixed):
 *
 *   # expect: ok                                      parses and round-trips
 *   # expect: type error: 4:18: const: 1e-999 is ...   tj_status_string, then
 *                                                     a part of the message
 *
 * The text is parsed whole, the expect line included (it is a comment), so
 * line numbers count it. test_text replays the corpus and mutates it;
 * test_locale replays it in a comma-decimal locale.
 */
#ifndef TJ_TEST_SUPPORT_CORPUS_H
#define TJ_TEST_SUPPORT_CORPUS_H

#include <stddef.h>

typedef struct TjCorpusCase {
  char *name;     /* the file name, "nan_negative.tj" */
  char *text;     /* the whole file, NUL-terminated */
  size_t len;     /* its length */
  char *status;   /* what tj_status_string must say: "ok", "type error", ... */
  char *fragment; /* a part of the message, with its "LINE:COL: "; "" for ok */
} TjCorpusCase;

/* Every case of TJ_SOURCE_DIR/tests/corpus, sorted by name; the count, or
 * -1 (with a message on stderr) when the folder or a file is unreadable or
 * a file lacks its expect line. */
int corpus_load(TjCorpusCase **cases);
void corpus_free(TjCorpusCase *cases, int count);

#endif /* TJ_TEST_SUPPORT_CORPUS_H */
