/*
 * Resize (opset 19), compiled: the weighted passes of one or two adjacent-in-order axes, each
 * output row of the first axis made in a double buffer and, while it is in cache, weighed along
 * the second axis and stored in data's dtype.
 *
 * The arithmetic is geomcli.ops.reference.resize's: per axis, in axis order, a sum from 0.0 of
 * weight * value over the taps in order, in double; then one conversion (integers rounded half
 * to even and saturated, NaN to 0, as geomcli.ops._numeric.to_dtype). It must be built without
 * -ffast-math and with -ffp-contract=off (a fused multiply-add rounds once where numpy rounds
 * twice).
 *
 * Only the buffer protocol is used (no numpy C API): the Python side (geomcli.ops.resize)
 * validates everything and hands over C-contiguous buffers:
 *
 *   resample(source, out, taps1, weights1, taps2, weights2, shape, kind, start, stop)
 *
 *   source   (p, n1, a, n2, b) items of kind, C-contiguous
 *   out      (p, m1, a, m2, b) items of kind, C-contiguous, writable
 *   taps1    (m1, k1) int64, each in [0, n1); weights1 (m1, k1) float64
 *   taps2    (m2, k2) int64 in [0, n2) and weights2 (m2, k2) float64, or None: the second
 *            axis is left as it is (then m2 = n2)
 *   shape    (p, n1, a, n2, b, m1, m2, k1, k2)
 *   kind     data's dtype by numpy's name: float32, float64, (u)int8..64
 *   start, stop  the output rows (p * m1 of them, in order) this call makes
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_to_dtype.h"

#if defined(__SSE2__) || defined(_M_X64)
#include <emmintrin.h> /* x86-64's baseline: no run-time dispatch */
#endif

#if defined(__GNUC__)
#define ALWAYS_INLINE static inline __attribute__((always_inline))
#else
#define ALWAYS_INLINE static inline
#endif

typedef struct {
    Py_ssize_t p, n1, a, n2, b, m1, m2, k1, k2;
    const char *source;
    char *out;
    const int64_t *taps1, *taps2; /* taps2 NULL: the second axis as it is */
    const double *weights1, *weights2;
    Py_ssize_t start, stop;
} Job;

/* Adding taps of the first axis into the row, per item type T: four taps a pass over the row
   where there are (the adds still in tap order: a quarter of the row's loads and stores), then
   one. The loops run over whole rows of adjacent values, which the compiler makes into vector
   code (each lane doing the scalar operations: the same bits). */
#define ADDS(NAME, T)                                                                                                  \
    ALWAYS_INLINE void NAME##_add4(double *restrict row, const T *restrict l0, const T *restrict l1,                   \
                                   const T *restrict l2, const T *restrict l3, const double *w, Py_ssize_t width)      \
    {                                                                                                                  \
        const double w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3];                                                       \
        for (Py_ssize_t x = 0; x < width; x++)                                                                         \
            row[x] = (((row[x] + w0 * (double)l0[x]) + w1 * (double)l1[x]) + w2 * (double)l2[x]) + w3 * (double)l3[x]; \
    }                                                                                                                  \
    ALWAYS_INLINE void NAME##_add1(double *restrict row, const T *restrict line, double w, Py_ssize_t width)           \
    {                                                                                                                  \
        for (Py_ssize_t x = 0; x < width; x++)                                                                         \
            row[x] = row[x] + w * (double)line[x];                                                                     \
    }

ADDS(f32, float)
ADDS(f64, double)
ADDS(u8, uint8_t)
ADDS(i8, int8_t)
ADDS(u16, uint16_t)
ADDS(i16, int16_t)
ADDS(u32, uint32_t)
ADDS(i32, int32_t)
ADDS(u64, uint64_t)
ADDS(i64, int64_t)

/* sum over t of weights[t] * values[t], from 0.0 in t order: taps that are neighbours, a last
   axis's (most outputs'). The products go two at a time (SSE2, each lane the scalar product), the
   adds one by one as the reference makes them: the same bits, a third fewer instructions than
   the taps one by one, which were most of a float32 image's shrink. */
ALWAYS_INLINE double adjacent_sum(const double *values, const double *weights, Py_ssize_t taps)
{
    double total = 0.0;
    Py_ssize_t t = 0;
#if defined(__SSE2__) || defined(_M_X64)
    for (; t + 2 <= taps; t += 2) {
        __m128d products = _mm_mul_pd(_mm_loadu_pd(weights + t), _mm_loadu_pd(values + t));
        total = total + _mm_cvtsd_f64(products);
        total = total + _mm_cvtsd_f64(_mm_unpackhi_pd(products, products));
    }
#endif
    for (; t < taps; t++)
        total = total + weights[t] * values[t];
    return total;
}

/* One output point of the second axis for N neighbouring channels (a pixel's, in H×W×C), per
   item type T: each channel's sum from 0.0 in tap order, the N sums side by side. One channel's
   adds wait on each other; N independent ones overlap, which made an RGB photo's second pass
   (the ImageNet recipe's resize) about twice as fast. */
#define CHANNELS(NAME, N, T, STORE)                                                                                  \
    ALWAYS_INLINE void NAME##_channels##N(T *restrict into, const double *group, const int64_t *taps,               \
                                          const double *weights, Py_ssize_t k, Py_ssize_t b)                        \
    {                                                                                                              \
        double total[N] = {0.0};                                                                                   \
        for (Py_ssize_t t = 0; t < k; t++) {                                                                       \
            const double w = weights[t], *values = group + taps[t] * b;                                            \
            for (int c = 0; c < N; c++)                                                                            \
                total[c] = total[c] + w * values[c];                                                               \
        }                                                                                                          \
        for (int c = 0; c < N; c++)                                                                                \
            into[c] = STORE(total[c]);                                                                             \
    }

/* Per item type T: the rows [start, stop) of the output, row holding a first-axis output row
   (a * n2 * b doubles). */
#define KIND(NAME, T, STORE)                                                                                        \
    CHANNELS(NAME, 1, T, STORE)                                                                                     \
    CHANNELS(NAME, 2, T, STORE)                                                                                     \
    CHANNELS(NAME, 3, T, STORE)                                                                                     \
    CHANNELS(NAME, 4, T, STORE)                                                                                     \
    static void NAME##_rows(const Job *job, double *restrict row)                                                   \
    {                                                                                                               \
        const Py_ssize_t width = job->a * job->n2 * job->b, out_width = job->a * job->m2 * job->b;                  \
        const Py_ssize_t b = job->b;                                                                                \
        for (Py_ssize_t r = job->start; r < job->stop; r++) {                                                       \
            const Py_ssize_t i = r / job->m1, j = r % job->m1;                                                      \
            const T *plane = (const T *)job->source + i * job->n1 * width;                                          \
            const int64_t *taps = job->taps1 + j * job->k1;                                                         \
            const double *weights = job->weights1 + j * job->k1;                                                    \
            for (Py_ssize_t x = 0; x < width; x++)                                                                  \
                row[x] = 0.0;                                                                                       \
            Py_ssize_t k = 0;                                                                                       \
            for (; k + 4 <= job->k1; k += 4)                                                                        \
                NAME##_add4(row, plane + taps[k] * width, plane + taps[k + 1] * width, plane + taps[k + 2] * width, \
                            plane + taps[k + 3] * width, weights + k, width);                                       \
            for (; k < job->k1; k++)                                                                                \
                NAME##_add1(row, plane + taps[k] * width, weights[k], width);                                       \
            T *restrict out = (T *)job->out + r * out_width;                                                        \
            if (job->taps2 == NULL) {                                                                               \
                for (Py_ssize_t x = 0; x < width; x++)                                                              \
                    out[x] = STORE(row[x]);                                                                         \
                continue;                                                                                           \
            }                                                                                                       \
            for (Py_ssize_t g = 0; g < job->a; g++) {                                                               \
                const double *group = row + g * job->n2 * b;                                                        \
                T *into = out + g * job->m2 * b;                                                                    \
                for (Py_ssize_t j2 = 0; j2 < job->m2; j2++) {                                                       \
                    const int64_t *taps2 = job->taps2 + j2 * job->k2;                                               \
                    const double *weights2 = job->weights2 + j2 * job->k2;                                          \
                    if (b == 1 && taps2[job->k2 - 1] - taps2[0] == job->k2 - 1) {                                   \
                        into[j2] = STORE(adjacent_sum(group + taps2[0], weights2, job->k2));                        \
                        continue;                                                                                   \
                    }                                                                                               \
                    Py_ssize_t c = 0;                                                                               \
                    for (; c + 4 <= b; c += 4)                                                                      \
                        NAME##_channels4(into + j2 * b + c, group + c, taps2, weights2, job->k2, b);                \
                    if (b - c == 3)                                                                                 \
                        NAME##_channels3(into + j2 * b + c, group + c, taps2, weights2, job->k2, b);                \
                    else if (b - c == 2)                                                                            \
                        NAME##_channels2(into + j2 * b + c, group + c, taps2, weights2, job->k2, b);                \
                    else if (b - c == 1)                                                                            \
                        NAME##_channels1(into + j2 * b + c, group + c, taps2, weights2, job->k2, b);                \
                }                                                                                                   \
            }                                                                                                       \
        }                                                                                                           \
    }

KIND(f32, float, TO_FLOAT)
KIND(f64, double, TO_DOUBLE)
KIND(u8, uint8_t, TO_U8)
KIND(i8, int8_t, TO_I8)
KIND(u16, uint16_t, TO_U16)
KIND(i16, int16_t, TO_I16)
KIND(u32, uint32_t, TO_U32)
KIND(i32, int32_t, TO_I32)
KIND(u64, uint64_t, TO_U64)
KIND(i64, int64_t, TO_I64)

typedef void (*Runner)(const Job *, double *);

static const struct {
    const char *name;
    Py_ssize_t itemsize;
    Runner run;
} KINDS[] = {
    {"float32", 4, f32_rows}, {"float64", 8, f64_rows}, {"uint8", 1, u8_rows},   {"int8", 1, i8_rows},
    {"uint16", 2, u16_rows},  {"int16", 2, i16_rows},   {"uint32", 4, u32_rows}, {"int32", 4, i32_rows},
    {"uint64", 8, u64_rows},  {"int64", 8, i64_rows},
};

/* a C-contiguous buffer of exactly `items` items of `itemsize` bytes */
static int get(PyObject *object, Py_buffer *view, Py_ssize_t items, Py_ssize_t itemsize, int writable,
               const char *name)
{
    if (PyObject_GetBuffer(object, view, PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return -1;
    if (view->len != items * itemsize) {
        PyErr_Format(PyExc_ValueError, "resample: %s holds %zd bytes, not %zd", name, view->len, items * itemsize);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* every tap inside its axis: a wrong one would read past the buffer */
static int check_taps(const int64_t *taps, Py_ssize_t count, Py_ssize_t length)
{
    for (Py_ssize_t i = 0; i < count; i++)
        if (taps[i] < 0 || taps[i] >= length) {
            PyErr_SetString(PyExc_ValueError, "resample: a tap lies outside its axis");
            return -1;
        }
    return 0;
}

PyDoc_STRVAR(resample_doc,
             "resample(source, out, taps1, weights1, taps2, weights2, shape, kind, start, stop)\n--\n\n"
             "Resize's weighted passes of two axes (the second None: one axis): source (p, n1, a, n2, b)\n"
             "into out (p, m1, a, m2, b), output rows [start, stop) of the p * m1, as\n"
             "geomcli.ops.reference.resize computes them. The GIL is released.");

static PyObject *resample(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *source_obj, *out_obj, *taps1_obj, *weights1_obj, *taps2_obj, *weights2_obj;
    const char *kind_name;
    Job job;
    memset(&job, 0, sizeof job);
    if (!PyArg_ParseTuple(args, "OOOOOO(nnnnnnnnn)snn:resample", &source_obj, &out_obj, &taps1_obj, &weights1_obj,
                          &taps2_obj, &weights2_obj, &job.p, &job.n1, &job.a, &job.n2, &job.b, &job.m1, &job.m2,
                          &job.k1, &job.k2, &kind_name, &job.start, &job.stop))
        return NULL;
    Runner run = NULL;
    Py_ssize_t itemsize = 0;
    for (size_t i = 0; i < sizeof KINDS / sizeof KINDS[0]; i++)
        if (strcmp(kind_name, KINDS[i].name) == 0) {
            run = KINDS[i].run;
            itemsize = KINDS[i].itemsize;
        }
    if (run == NULL) {
        PyErr_Format(PyExc_ValueError, "resample: dtype %s is not compiled", kind_name);
        return NULL;
    }
    int second = taps2_obj != Py_None;
    if (job.p < 0 || job.n1 < 1 || job.a < 0 || job.n2 < 1 || job.b < 0 || job.m1 < 0 || job.m2 < 0 || job.k1 < 1 ||
        (second && job.k2 < 1) || (!second && job.m2 != job.n2) || job.start < 0 || job.stop < job.start ||
        job.stop > job.p * job.m1) {
        PyErr_SetString(PyExc_ValueError, "resample: shape or rows out of range");
        return NULL;
    }
    /* source, out, taps1, weights1 and, with a second axis, taps2 and weights2 */
    const struct {
        PyObject *object;
        Py_ssize_t items, itemsize;
        int writable;
        const char *name;
    } wanted[] = {
        {source_obj, job.p * job.n1 * job.a * job.n2 * job.b, itemsize, 0, "source"},
        {out_obj, job.p * job.m1 * job.a * job.m2 * job.b, itemsize, 1, "out"},
        {taps1_obj, job.m1 * job.k1, 8, 0, "taps1"},
        {weights1_obj, job.m1 * job.k1, 8, 0, "weights1"},
        {taps2_obj, job.m2 * job.k2, 8, 0, "taps2"},
        {weights2_obj, job.m2 * job.k2, 8, 0, "weights2"},
    };
    Py_buffer views[6];
    int held = 0, count = second ? 6 : 4;
    PyObject *result = NULL;
    double *row = NULL;
    for (; held < count; held++)
        if (get(wanted[held].object, &views[held], wanted[held].items, wanted[held].itemsize, wanted[held].writable,
                wanted[held].name) < 0)
            goto done;
    if (check_taps(views[2].buf, job.m1 * job.k1, job.n1) < 0 ||
        (second && check_taps(views[4].buf, job.m2 * job.k2, job.n2) < 0))
        goto done;
    job.source = views[0].buf;
    job.out = views[1].buf;
    job.taps1 = views[2].buf;
    job.weights1 = views[3].buf;
    job.taps2 = second ? views[4].buf : NULL;
    job.weights2 = second ? views[5].buf : NULL;
    Py_ssize_t width = job.a * job.n2 * job.b;
    if (job.stop > job.start && width > 0) {
        row = malloc((size_t)width * sizeof(double));
        if (row == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        Py_BEGIN_ALLOW_THREADS
        run(&job, row);
        Py_END_ALLOW_THREADS
    }
    result = Py_NewRef(Py_None);
done:
    free(row);
    while (held > 0)
        PyBuffer_Release(&views[--held]);
    return result;
}

static PyMethodDef methods[] = {
    {"resample", resample, METH_VARARGS, resample_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_resize",
    "Resize-19's weighted passes compiled: geomcli.ops.reference.resize's sums (buffer protocol only).",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__resize(void) { return PyModule_Create(&module); }
