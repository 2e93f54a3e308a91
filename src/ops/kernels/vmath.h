/* vmath.h: the math functions elementwise kernels call, type-generic over float
 * and double (tgmath). Vectorisable versions of the hot ones go here. */
#ifndef CT_VMATH_H
#define CT_VMATH_H
#include <tgmath.h>
#endif
