/*
 * consumer.c — a program that uses an installed (or embedded) tilejit the
 * way an outside project would: only <tilejit.h> and the library, no
 * internal header. tests/consumer/run.sh builds it through find_package,
 * pkg-config and add_subdirectory, linked shared and static.
 *
 * It needs no GPU and no driver: it plans softmax for 3 rows of 10 f32
 * values, specializes the program, runs it through the CPU interpreter and
 * checks every output against a double-precision reference, then emits the
 * PTX for sm_90 and checks its entry and target. It exits 0 when all holds
 * and prints what failed otherwise.
 *
 * It also defines a buf_init of its own (CONSUMER_DEFINES_BUF_INIT), the
 * name of one of tilejit's internal functions: with the library's internals
 * hidden (shared) or local (static), it links and tilejit never calls it.
 */
#include <tilejit.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROWS 3
#define COLS 10

#ifdef CONSUMER_DEFINES_BUF_INIT
void buf_init(void *b);
void buf_init(void *b) {
  (void)b;
  fprintf(stderr, "consumer: tilejit called the program's buf_init (an internal symbol leaked)\n");
  exit(3);
}
#endif

static int failures;

static void check(int ok, const char *what) {
  if (!ok) {
    fprintf(stderr, "consumer: FAIL: %s\n", what);
    failures++;
  }
}

/* The softmax spec for rows of COLS f32 values, as tj_softmax would plan it. */
static tj_spec *softmax_spec(void) {
  tj_softmax_plan plan;
  tj_spec_options options;
  tj_program *program = NULL;
  tj_spec *spec = NULL;
  if (tj_softmax_plan_for(NULL, TJ_DTYPE_F32, ROWS, COLS, NULL, &plan) != TJ_OK ||
      tj_softmax_spec_options(&plan, TJ_DTYPE_F32, COLS, &options) != TJ_OK ||
      tj_softmax_program(plan.which, COLS, &program) != TJ_OK)
    return NULL;
  if (tj_specialize(program, &options, &spec) != TJ_OK)
    fprintf(stderr, "consumer: specialize: %s\n", tj_program_error(program));
  tj_program_destroy(program);
  return spec;
}

static void check_interpreter(tj_spec *spec) {
  float x[ROWS * COLS], y[ROWS * COLS];
  for (int i = 0; i < ROWS * COLS; i++) {
    x[i] = (float)((i * 7) % 11) * 0.5f - 2.0f;
    y[i] = -1.0f;
  }
  tj_arg args[5] = {{TJ_ARG_PTR, {.ptr = y}, sizeof y},
                    {TJ_ARG_PTR, {.ptr = x}, sizeof x},
                    {TJ_ARG_INT, {.i = COLS}, 0},
                    {TJ_ARG_INT, {.i = COLS}, 0},
                    {TJ_ARG_INT, {.i = COLS}, 0}};
  tj_status st = tj_interpret(spec, args, 5, ROWS);
  check(st == TJ_OK, "tj_interpret returns TJ_OK");
  for (int r = 0; r < ROWS && st == TJ_OK; r++) {
    double max = -INFINITY, sum = 0;
    for (int c = 0; c < COLS; c++) max = fmax(max, x[r * COLS + c]);
    for (int c = 0; c < COLS; c++) sum += exp(x[r * COLS + c] - max);
    for (int c = 0; c < COLS; c++) {
      double want = exp(x[r * COLS + c] - max) / sum;
      if (fabs(y[r * COLS + c] - want) > 1e-6 + 1e-5 * want) {
        fprintf(stderr, "consumer: y[%d][%d] = %.9g, want %.9g\n", r, c, y[r * COLS + c], want);
        failures++;
      }
    }
  }
}

static void check_ptx(tj_spec *spec) {
  tj_codegen_options options = {.arch = 90};
  tj_kernel_info info;
  char *ptx = NULL;
  check(tj_emit_ptx(spec, &options, &ptx, &info) == TJ_OK, "tj_emit_ptx returns TJ_OK");
  if (!ptx) return;
  check(strstr(ptx, ".target sm_90") != NULL, "the PTX targets sm_90");
  check(strstr(ptx, ".entry tj_softmax(") != NULL, "the PTX has the entry tj_softmax");
  check(strcmp(info.entry, "tj_softmax") == 0, "the kernel info names the entry tj_softmax");
  check(info.param_count == 5, "the kernel has softmax's 5 parameters");
  tj_free(ptx);
}

int main(void) {
  check(strcmp(tj_version(), TJ_VERSION_STRING) == 0, "the library's version is the header's");
  check(strcmp(tj_status_string(TJ_OK), tj_status_string(TJ_ERR_PARSE)) != 0,
        "status strings differ");
  tj_spec *spec = softmax_spec();
  check(spec != NULL, "the softmax spec is made");
  if (spec) {
    check_interpreter(spec);
    check_ptx(spec);
  }
  tj_spec_destroy(spec);
  if (failures) return 1;
  printf("consumer: tilejit %s: softmax of %dx%d on the interpreter and its PTX are right\n",
         tj_version(), ROWS, COLS);
  return 0;
}
