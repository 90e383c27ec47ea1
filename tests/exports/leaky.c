/*
 * leaky.c — the fixture that shows test_exports can fail: a shared library
 * built with default visibility, so that besides its one declared API
 * function it exports buf_init, as libtilejit.so once did with its
 * internals. test_exports_catches_leak runs check_exports.cmake on it and
 * passes only when the script names buf_init as a symbol outside the API.
 */
#define TJ_API __attribute__((visibility("default")))

TJ_API int tj_fixture_api(void);
int buf_init(void);

int buf_init(void) { return 1; }

TJ_API int tj_fixture_api(void) { return buf_init() + 1; }
