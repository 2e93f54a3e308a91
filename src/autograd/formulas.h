/* formulas.h: the vocabulary backward formulas are written in (the role of
 * derivatives.yaml's expressions). Every word is a differentiable op, an ag_*
 * call whose result goes to the formula's frame (F), so that with create_graph
 * the backward pass is itself recorded. Included by derivatives.c and the
 * d_*.c files of the op families; `c` is the BackwardCtx of the formula. */
#ifndef CT_FORMULAS_H
#define CT_FORMULAS_H
#include "autograd/autograd.h"

#define G (c->go[0])
#define SELF (c->in[0])
#define OTHER (c->in[1])
#define RESULT (c->out[0])
#define IN(k) (c->in[k])
#define S0 (c->args->s[0])
#define S1 (c->args->s[1])
#define ARGI(k) (c->args->i[k])
#define META(k) (&c->node->in_meta[k])
#define RET(x) return (gi[0] = c10_retain(x)) ? 0 : -1
#define UN(op, a) F(ag_unary(OP_##op, a))
#define BIN(op, a, b) F(ag_binary(OP_##op, a, b))
#define BINS(op, a, s) F(ag_binary_scalar(OP_##op, a, s))
#define CMPS(op, a, s) BINS(op, a, s)
#define MUL(a, b) BIN(mul, a, b)
#define DIV(a, b) BIN(div, a, b)
#define ADD(a, b) BIN(add, a, b)
#define SUB(a, b) BIN(sub, a, b)
#define EQ(a, b) BIN(eq, a, b)
#define POW(a, b) BIN(pow, a, b)
#define DIVFLOOR(a, b) BIN(div_floor, a, b)
#define DIVTRUNC(a, b) BIN(div_trunc, a, b)
#define MULS(a, s) ((s) == 1 ? (a) : BINS(mul, a, s)) /* add's alpha is usually 1 */
#define DIVS(a, s) BINS(div, a, s)
#define ADDS(a, s) BINS(add, a, s)
#define RSUBS(a, s) ADDS(NEG(a), s) /* s - a */
#define POWS(a, s) BINS(pow, a, s)
#define GTS(a, s) BINS(gt, a, s)
#define EQS(a, s) BINS(eq, a, s)
#define NES(a, s) BINS(ne, a, s)
#define NEG(a) UN(neg, a)
#define ABS(a) UN(abs, a)
#define COS(a) UN(cos, a)
#define SIN(a) UN(sin, a)
#define COSH(a) UN(cosh, a)
#define SINH(a) UN(sinh, a)
#define EXP(a) UN(exp, a)
#define LOG(a) UN(log, a)
#define SQRT(a) UN(sqrt, a)
#define TANH(a) UN(tanh, a)
#define ERF(a) UN(erf, a)
#define SIGMOID(a) UN(sigmoid, a)
#define SGN(a) UN(sign, a)
#define ISNAN(a) UN(isnan, a)
#define ISFINITE(a) UN(isfinite, a)
/* A zero gradient shaped like g (the output), summed down to each input later. */
#define ZEROS(g) F(c10_full((g)->sizes, (g)->ndim, 0, (g)->dtype, (g)->device))

#endif
