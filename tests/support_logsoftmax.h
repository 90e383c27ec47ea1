/*
 * support_logsoftmax.h — the embedding scenario's program: a user's row-wise
 * log-softmax in the text form, with rows stride elements apart, an f32
 * parameter and an i64 one (tag) that reaches no address. Shared by the
 * launch-check suites (test_launch_checks.c, gpu_errors.c).
 */
#ifndef TJ_TEST_SUPPORT_LOGSOFTMAX_H
#define TJ_TEST_SUPPORT_LOGSOFTMAX_H

static const char logsoftmax_text[] = "kernel user_log_softmax\n"
                                      "%0 : ptr<f32> = param y\n"
                                      "%1 : ptr<f32> = param x\n"
                                      "%2 : i64 = param stride\n"
                                      "%3 : i32 = param n\n"
                                      "%4 : i64 = param tag\n"
                                      "%5 : i32 = program_id\n"
                                      "%6 : i64 = cast %5\n"
                                      "%7 : i64 = mul %6, %2\n"
                                      "%8 : ptr<f32> = ptr_add %1, %7\n"
                                      "%9 : tile<i32,BLOCK> = arange\n"
                                      "%10 : tile<pred,BLOCK> = lt %9, %3\n"
                                      "%11 : f32 = const -inf\n"
                                      "%12 : tile<f32,BLOCK> = load %8, %9, %10, %11\n"
                                      "%13 : f32 = reduce_max %12\n"
                                      "%14 : tile<f32,BLOCK> = sub %12, %13\n"
                                      "%15 : tile<f32,BLOCK> = exp %14\n"
                                      "%16 : f32 = reduce_sum %15\n"
                                      "%17 : f32 = log %16\n"
                                      "%18 : f32 = cast %4\n"
                                      "%19 : f32 = const 0\n"
                                      "%20 : f32 = mul %18, %19\n"
                                      "%21 : f32 = add %17, %20\n"
                                      "%22 : tile<f32,BLOCK> = sub %14, %21\n"
                                      "%23 : ptr<f32> = ptr_add %0, %7\n"
                                      "store %23, %9, %22, %10\n";

#endif /* TJ_TEST_SUPPORT_LOGSOFTMAX_H */
