/*
 * The interpolated value, a double, stored as data's dtype: geomcli.ops._numeric.to_dtype in C,
 * shared by _grid_sample.c and _resize.c. Floats by a cast (rounded once); integers rounded half
 * to even and saturated to their range, NaN to 0.
 */
#ifndef GEOMCLI_TO_DTYPE_H
#define GEOMCLI_TO_DTYPE_H

#include <math.h>
#include <stdint.h>

/* Rounding to a whole number without a conversion to an integer: for |v| < 2**51, v + 1.5 * 2**52
   lies in [2**52, 2**53), where doubles are 1 apart, so the sum is v rounded half to even, and
   - 1.5 * 2**52 undoes the shift exactly: rint(v) (-0.0 and small negatives give +0.0, as
   Python's int does). rint itself is a call into libm where SSE2 has no instruction for it. */
#define MAGIC 0x1.8p52

/* rint (half to even), saturated to [low, high], NaN to 0. The bounds are whole numbers, so
   clamping first and rounding then gives the same; within 32-bit bounds the rounding is the
   shift by MAGIC (exact there), else rint. */
static inline double saturate(double v, double low, double high)
{
    double c = v > low ? v : low; /* without branches: maxsd, minsd, and a mask for NaN */
    c = c < high ? c : high;
    c = high - low <= 4294967295.0 ? (c + MAGIC) - MAGIC : rint(c);
    return v == v ? c : 0.0;
}

/* float64 cannot hold int64's and uint64's largest values: 2**63 (2**64) and past saturate to the
   largest value, below it the bound is the largest double below, as _numeric.to_dtype does */
static inline int64_t to_i64(double v)
{
    return v >= 0x1p63 ? INT64_MAX : (int64_t)saturate(v, -0x1p63, 9223372036854774784.0);
}

static inline uint64_t to_u64(double v)
{
    return v >= 0x1p64 ? UINT64_MAX : (uint64_t)saturate(v, 0.0, 18446744073709549568.0);
}

#define TO_FLOAT(v) ((float)(v))
#define TO_DOUBLE(v) (v)
#define TO_U8(v) ((uint8_t)saturate((v), 0.0, 255.0))
#define TO_I8(v) ((int8_t)saturate((v), -128.0, 127.0))
#define TO_U16(v) ((uint16_t)saturate((v), 0.0, 65535.0))
#define TO_I16(v) ((int16_t)saturate((v), -32768.0, 32767.0))
#define TO_U32(v) ((uint32_t)saturate((v), 0.0, 4294967295.0))
#define TO_I32(v) ((int32_t)saturate((v), -2147483648.0, 2147483647.0))
#define TO_U64(v) to_u64(v)
#define TO_I64(v) to_i64(v)

#endif
