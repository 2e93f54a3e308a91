/* harness.h: a whole test harness in a page (after Redis' testhelp.h and libuv's
 * task.h). A test file defines TEST(name) functions and lists them in main with
 * RUN(name); CHECK* print both sides on failure and the run ends with the line
 * "N passed, N failed" that CI reads. */
#ifndef CT_TEST_HARNESS_H
#define CT_TEST_HARNESS_H
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "ctorch.h"

static int th_failed_checks, th_passed, th_failed;

#define TEST(name) static void name(void)
#define FAIL_AT(...)                                                              \
    do {                                                                          \
        th_failed_checks++;                                                       \
        fprintf(stderr, "  %s:%d: ", __FILE__, __LINE__);                         \
        fprintf(stderr, __VA_ARGS__);                                             \
        fprintf(stderr, "\n");                                                    \
    } while (0)
#define CHECK(cond)                                                               \
    do { if (!(cond)) FAIL_AT("CHECK(%s) failed%s%s", #cond,                      \
                              ct_last_error() ? "; last error: " : "",             \
                              ct_last_error() ? ct_last_error() : ""); } while (0)
#define CHECK_EQ_INT(a, b)                                                        \
    do { long long x_ = (long long)(a), y_ = (long long)(b);                      \
         if (x_ != y_) FAIL_AT("%s == %s: %lld != %lld", #a, #b, x_, y_); } while (0)
#define CHECK_NEAR(a, b, tol)                                                     \
    do { double x_ = (a), y_ = (b);                                               \
         if (!(fabs(x_ - y_) <= (tol) * (1 + fabs(y_))))                          \
             FAIL_AT("%s ~ %s: %.10g vs %.10g", #a, #b, x_, y_); } while (0)
#define CHECK_STR(a, b)                                                           \
    do { const char *x_ = (a), *y_ = (b);                                         \
         if (!x_ || !y_ || strcmp(x_, y_)) FAIL_AT("%s == %s:\n    got:  %s\n    want: %s", \
                                                   #a, #b, x_ ? x_ : "(null)", y_ ? y_ : "(null)"); } while (0)
/* The call fails with NULL/-1 and the message contains `part`. */
#define CHECK_ERR(expr, part)                                                     \
    do { ct_clear_error(); int bad_ = (expr) == 0;                                \
         const char *m_ = ct_last_error();                                        \
         if (!bad_ || !m_ || !strstr(m_, part))                                   \
             FAIL_AT("%s should fail with \"%s\"; got %s", #expr, part,           \
                     m_ ? m_ : "no error");                                       \
         ct_clear_error(); } while (0)
#define CHECK_ERR_INT(expr, part) CHECK_ERR((expr) != -1 ? (void *)1 : (void *)0, part)

#define RUN(name)                                                                 \
    do { int before_ = th_failed_checks; ct_clear_error(); ct_scope_begin();      \
         name(); ct_scope_end();                                                  \
         if (th_failed_checks == before_) th_passed++;                            \
         else { th_failed++; fprintf(stderr, "FAIL %s\n", #name); } } while (0)
#define REPORT()                                                                  \
    (printf("%d passed, %d failed\n", th_passed, th_failed), th_failed ? 1 : 0)
#endif
