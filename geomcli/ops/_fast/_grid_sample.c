/*
 * GridSample (opset 22), compiled: per output point the position, the taps, their weights, the
 * gathers and the sums for every channel, in one pass, with the GIL released.
 *
 * The arithmetic is geomcli.ops.reference.grid_sample's, operation for operation and in the same
 * order, in double: the same bits. It must be built without -ffast-math and with
 * -ffp-contract=off (a fused multiply-add rounds once where the reference rounds twice).
 *
 * Only the buffer protocol is used (no numpy C API, no numpy headers): the Python side
 * (geomcli.ops.grid_sample) validates everything and hands over buffers:
 *
 *   sample(plane, coords, out, lengths, mode, padding, align_corners, kind, fill, epsilon, row=0)
 *
 *   plane    (C, D1, ..., Dr) of one batch item, any strides of whole items (an H x W x C image's
 *            (C, H, W) view, read where it lies), or C-contiguous of as many items; any item size
 *            for nearest; linear in 1-D and 3-D and cubic need the innermost axis's stride 1
 *   coords   2-D (S, r) float32 or float64, any strides: x (the innermost axis) first
 *   out      writable 2-D (C, S), any strides, plane's item size
 *   lengths  (D1, ..., Dr), r = 1, 2 or 3, each >= 1
 *   mode     "linear", "nearest" or "cubic";  padding "zeros", "border" or "reflection"
 *   kind     data's dtype by numpy's name (float32, uint8, ...) for linear and cubic; any
 *            name for nearest, which copies item-size bytes
 *   fill     linear and cubic: fill as a float (what a tap outside reads with zeros padding,
 *            and what a point whose position is not finite gives); nearest: fill's bytes
 *   epsilon  the grid's rounding per pixel of an axis's length: with zeros padding a tap outside
 *            beside one inside reads 0, not fill, where its weight is at most epsilon x length
 *
 *   sample_affine(plane, theta, out, lengths, mode, padding, align_corners, kind, fill, epsilon, row,
 *                 size, first, double)
 *
 *   the same for 2-D, the coordinates made here instead of read from a grid: AffineGrid's for an
 *   output of size (H, W), theta's 2 x 3 values (x's row, then y's) given as 6 floats, rounded to
 *   float32 (or kept in float64 if double), of the points first .. first + S - 1 of the H x W grid
 *   (S: out's points). A warp then needs no grid in memory: reading 8 bytes of grid a point cost
 *   about as much as making them.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "_to_dtype.h"

#if defined(__SSE2__) || defined(_M_X64)
#include <emmintrin.h> /* x86-64's baseline: no run-time dispatch */
#define VECTORS 1
#else
#define VECTORS 0
#endif

/* AVX2 where the processor has it (checked at run time; SSE2 is all x86-64 promises): vectors of 4
   doubles, which hold a pixel's 3 or 4 channels at once. It runs the same IEEE operations, lane by
   lane, as the SSE2 and scalar code: the same bits (no FMA: gcc's -ffp-contract=off, and the
   target does not name it). */
#if VECTORS && defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>
#define AVX2 1
#define AVX2_TARGET __attribute__((target("avx2")))
#else
#define AVX2 0
#endif

#if defined(__GNUC__)
#define ALWAYS_INLINE static inline __attribute__((always_inline))
#define NOINLINE static __attribute__((noinline))
#else
#define ALWAYS_INLINE static inline
#define NOINLINE static
#endif

#define MAX_RANK 3
#define CUBIC_A (-0.75) /* Keys' parameter, as onnxruntime and PyTorch */

enum { LINEAR, NEAREST, CUBIC };
enum { ZEROS, BORDER, REFLECTION };

typedef struct {
    int count;                 /* taps on this axis: 1, 2 or 4 */
    Py_ssize_t offset[4];      /* each tap's index times the axis's stride; 0 where it reads fill */
    unsigned char outside[4];  /* 1 where the tap reads fill (zeros padding), plus 2 where its weight
                                  is 0, or within the grid's rounding of 0 beside a tap inside (zeros
                                  padding): a lattice tap with both, OR'd over its axes, reads 0 */
    double weight[4];
} Axis;

typedef struct {
    int rank, mode, padding, align;
    Py_ssize_t length[MAX_RANK], stride[MAX_RANK]; /* outermost axis first; strides in items */
    Py_ssize_t channels, plane;                    /* plane: items per channel */
    const char *data;
    Py_ssize_t itemsize;
    const char *coords;
    Py_ssize_t coord_point, coord_axis; /* bytes */
    int coords_double;
    char *out;
    Py_ssize_t out_channel, out_point; /* bytes */
    Py_ssize_t points;
    Py_ssize_t row; /* points per output row: the points are visited in tiles of rows (see TILE) */
    double fill;             /* linear and cubic */
    double epsilon;          /* the grid's rounding per pixel of an axis's length (grid_sample.fill_epsilon) */
    const char *fill_bytes;  /* nearest */
    /* sample_affine (coords NULL): the grid is AffineGrid's of theta (x's row, then y's) for an
       output of grid_height x grid_width, and the job's point p is its point first_point + p */
    double theta[2][3];
    Py_ssize_t grid_height, grid_width, first_point;
    int grid_double;
    /* each coordinate's x term (x_w * theta[k][0]), terms[k][j] of point j (mod terms_count) of the job */
    const double *terms[2];
    Py_ssize_t terms_count;
} Job;

/* --- positions and taps (reference.unnormalize, axis_taps, pad_index) ------------------------ */

ALWAYS_INLINE double unnormalize(double g, Py_ssize_t length, int align)
{
    if (align)
        return (g + 1) / 2 * (double)(length - 1);
    return ((g + 1) * (double)length - 1) / 2;
}

ALWAYS_INLINE double reflect(double x, double low, double high)
{
    double span = high - low;
    if (span == 0)
        return low;
    double d = fmod(fabs(x - low), 2 * span);
    return low + (d > span ? 2 * span - d : d);
}

ALWAYS_INLINE double cubic_near(double d) { return ((CUBIC_A + 2) * d - (CUBIC_A + 3)) * d * d + 1; }

ALWAYS_INLINE double cubic_far(double d)
{
    return ((CUBIC_A * d - 5 * CUBIC_A) * d + 8 * CUBIC_A) * d - 4 * CUBIC_A;
}

/* The taps of a finite position x on an axis; returns 1 if one of them reads fill. tolerance: a
   tap outside beside one inside reads 0 where its weight is at most this (zeros padding). */
ALWAYS_INLINE int axis_taps(double x, Py_ssize_t length, Py_ssize_t stride, int mode, int padding, int align,
                            double tolerance, Axis *axis)
{
    double base;
    int first; /* the first tap's offset from base */
    if (mode == NEAREST) {
        base = rint(x); /* half to even, as np.rint (the default rounding mode) */
        first = 0;
        axis->count = 1;
        axis->weight[0] = 1.0;
    } else {
        if (mode == LINEAR && padding == BORDER) {
            /* min(max(x, 0.0), L - 1.0) as Python's max and min pick */
            if (0.0 > x)
                x = 0.0;
            if ((double)(length - 1) < x)
                x = (double)(length - 1);
        } else if (mode == LINEAR && padding == REFLECTION) {
            double low = align ? 0.0 : -0.5, high = align ? (double)(length - 1) : (double)length - 0.5;
            if (x < low || x > high)
                x = reflect(x, low, high);
        }
        /* math.floor gives an int, and an int 0 is +0.0 again in x - f: floor(-0.0) + 0.0 is +0.0 */
        double f = floor(x) + 0.0;
        double t = x - f;
        base = f;
        if (mode == LINEAR) {
            first = 0;
            axis->count = 2;
            axis->weight[0] = 1 - t;
            axis->weight[1] = t;
        } else {
            first = -1;
            axis->count = 4;
            axis->weight[0] = cubic_far(t + 1);
            axis->weight[1] = cubic_near(t);
            axis->weight[2] = cubic_near(1 - t);
            axis->weight[3] = cubic_far(2 - t);
        }
    }
    int any = 0;
    if (padding == REFLECTION) {
        Py_ssize_t period = align ? 2 * (length - 1) : 2 * length;
        /* a mirror sees indices modulo its period: fmod is exact, so this holds past 2**53 too */
        Py_ssize_t start = period ? (Py_ssize_t)fmod(base, (double)period) + first : 0;
        for (int k = 0; k < axis->count; k++) {
            Py_ssize_t index = 0; /* a length-1 axis with align_corners: its only pixel */
            if (period) {
                Py_ssize_t m = (start + k) % period;
                if (m < 0)
                    m += period;
                if (align)
                    index = m > length - 1 ? period - m : m;
                else
                    index = m >= length ? period - 1 - m : m;
            }
            axis->offset[k] = index * stride;
            axis->outside[k] = 0;
        }
        return 0;
    }
    /* a few taps past an end all read fill (zeros) or the same edge pixel (border): clamped there,
       base casts to an integer whatever x was */
    double low = -8.0, high = (double)length + 8.0;
    int inside = 0; /* taps inside */
    Py_ssize_t start = (Py_ssize_t)(base < low ? low : base > high ? high : base) + first;
    for (int k = 0; k < axis->count; k++) {
        Py_ssize_t index = start + k;
        unsigned char outside = 0;
        if (index < 0 || index >= length) {
            if (padding == ZEROS) {
                outside = 1;
                index = 0;
                any = 1;
            } else {
                index = index < 0 ? 0 : length - 1;
            }
        }
        if (padding == ZEROS && axis->weight[k] == 0.0)
            outside |= 2;
        axis->offset[k] = index * stride;
        axis->outside[k] = outside;
        inside += !outside;
    }
    if (any && inside)
        for (int k = 0; k < axis->count; k++)
            if (axis->outside[k] && fabs(axis->weight[k]) <= tolerance)
                axis->outside[k] |= 2;
    return any;
}

/* --- AffineGrid's coordinates (geomcli.ops.affine_grid: _base_coordinates, _grid_terms) ------ */

/* The base coordinate of index i on an axis of length L, in [-1, 1], as numpy computes it */
ALWAYS_INLINE double base_coordinate(Py_ssize_t i, Py_ssize_t length, int align)
{
    if (align)
        return length > 1 ? 2 * (double)i / (double)(length - 1) - 1 : 0.0;
    return (2 * (double)i + 1) / (double)length - 1;
}

/* The y part of coordinate k of output row h: theta[k][2] + y_h * theta[k][1] */
ALWAYS_INLINE double affine_rest(const Job *job, Py_ssize_t h, int k)
{
    return job->theta[k][2] + base_coordinate(h, job->grid_height, job->align) * job->theta[k][1];
}

/* rest + x term in float64, rounded once to the grid's type, as affine_grid rounds it */
ALWAYS_INLINE double affine_sum(const Job *job, double rest, double x_term)
{
    double sum = rest + x_term;
    return job->grid_double ? sum : (double)(float)sum;
}

/* The x terms of the job's points j = 0 .. terms_count - 1, terms_count = min(points, W): point j
   (and every point j + W after it) lies in column (first_point + j) mod W */
static void affine_terms(const Job *job, double *terms)
{
    const Py_ssize_t width = job->grid_width, start = job->first_point % width;
    for (int k = 0; k < 2; k++)
        for (Py_ssize_t j = 0, column = start; j < job->terms_count; j++, column = column + 1 < width ? column + 1 : 0)
            terms[k * job->terms_count + j] = base_coordinate(column, width, job->align) * job->theta[k][0];
}

/* Coordinate k (0: x, 1: y) of the job's points [first, first + n), into x: in stretches that
   share a row (one rest term) and a run of x terms */
ALWAYS_INLINE void affine_coordinates(const Job *job, Py_ssize_t first, int n, int k, double *x)
{
    const Py_ssize_t width = job->grid_width, count = job->terms_count;
    const double *terms = job->terms[k];
    for (int q = 0; q < n;) {
        Py_ssize_t point = job->first_point + first + q, j = (first + q) % count;
        Py_ssize_t stretch = width - point % width; /* to the row's end */
        if (count - j < stretch)
            stretch = count - j;
        if (n - q < stretch)
            stretch = n - q;
        const double rest = affine_rest(job, point / width, k);
        if (job->grid_double) {
            for (Py_ssize_t s = 0; s < stretch; s++)
                x[q + s] = rest + terms[j + s];
        } else {
            for (Py_ssize_t s = 0; s < stretch; s++)
                x[q + s] = (double)(float)(rest + terms[j + s]);
        }
        q += (int)stretch;
    }
}

ALWAYS_INLINE double coordinate(const Job *job, Py_ssize_t p, int a)
{
    if (job->coords == NULL) {
        const int k = job->rank - 1 - a; /* x: the innermost axis's */
        const Py_ssize_t point = job->first_point + p;
        return affine_sum(job, affine_rest(job, point / job->grid_width, k), job->terms[k][p % job->terms_count]);
    }
    const char *at = job->coords + p * job->coord_point + (job->rank - 1 - a) * job->coord_axis; /* x last */
    if (job->coords_double) {
        double g;
        memcpy(&g, at, sizeof g);
        return g;
    }
    float single;
    memcpy(&single, at, sizeof single);
    return single;
}

/* Point p's taps on every axis, each padded on its own. Returns 0 if a coordinate is not finite
   (the point reads fill), else 1, with *any set if a tap reads fill. */
static int point_taps(const Job *job, Py_ssize_t p, Axis *axes, int *any)
{
    *any = 0;
    for (int a = 0; a < job->rank; a++) {
        double g = coordinate(job, p, a);
        double x = unnormalize(g, job->length[a], job->align);
        if (!isfinite(x)) {
            if (!isfinite(g))
                return 0;
            x = copysign(DBL_MAX, x); /* a finite g whose position overflows: past every border */
        }
        *any |= axis_taps(x, job->length[a], job->stride[a], job->mode, job->padding, job->align,
                          job->epsilon * (double)job->length[a], &axes[a]);
    }
    return 1;
}

/* The common case, most points of most grids: every tap lies inside and no padding is at work
   (a position border would clamp or reflection mirror lies outside, so it is not this case). Then
   the taps are fixed steps from the first one: its flat index and the weights are all it takes.
   Returns 0 otherwise (not finite either: NaN fails every comparison). rank and mode are
   constants where this is inlined. */
ALWAYS_INLINE int interior(const Job *job, Py_ssize_t p, int rank, int mode, Py_ssize_t *flat,
                           double weight[MAX_RANK][4])
{
    Py_ssize_t offset = 0;
    for (int a = 0; a < rank; a++) {
        Py_ssize_t length = job->length[a];
        double x = unnormalize(coordinate(job, p, a), length, job->align);
        if (mode == NEAREST) {
            double f = rint(x);
            if (!(f >= 0.0 && f <= (double)(length - 1)))
                return 0;
            offset += (Py_ssize_t)f * job->stride[a];
            continue;
        }
        /* the taps floor(x) (- 1 for cubic) .. + 1 (+ 2) all inside: floor(x) in [0, L - 2] for
           linear (x in [0, L - 1), which border and reflection leave as it is), in [1, L - 3] for
           cubic; that is x in [low, end). There x >= 0 (or -0.0), so a truncation is its floor,
           and the int's double is +0.0 where math.floor's int is 0 */
        double low = mode == CUBIC ? 1.0 : 0.0, end = (double)(length - (mode == CUBIC ? 2 : 1));
        if (!(x >= low && x < end))
            return 0;
        Py_ssize_t i = (Py_ssize_t)x;
        double t = x - (double)i;
        if (mode == LINEAR) {
            weight[a][0] = 1 - t;
            weight[a][1] = t;
        } else {
            weight[a][0] = cubic_far(t + 1);
            weight[a][1] = cubic_near(t);
            weight[a][2] = cubic_near(1 - t);
            weight[a][3] = cubic_far(2 - t);
            i -= 1;
        }
        offset += i * job->stride[a];
    }
    *flat = offset;
    return 1;
}

/* The points [0, points) are rows of job->row points (or one row), visited in runs of at most TILE
   points: tiles of BAND rows by TILE points. A rotated or scaled grid reads data along slanted
   lines: along a whole output row it touches a page and a few cache lines of data per input row
   crossed, more than the TLB and the L2 cache keep for the next output row once rows are long; a
   tile reads a compact patch (128 x 64 output points under a 30-degree turn: some 150 KiB of
   float32 RGB data, and fewer lines read twice at its edges than smaller tiles). The order
   changes no value: each point is computed on its own. */
#define TILE 128
#define BAND 64
#define FOR_RUNS(job, first, last)                                                                    \
    for (Py_ssize_t row_ = (job)->row > 0 && (job)->points % (job)->row == 0 ? (job)->row : (job)->points, \
                    rows_ = row_ ? (job)->points / row_ : 0, band_ = 0;                              \
         band_ < rows_; band_ += BAND)                                                                \
        for (Py_ssize_t column_ = 0; column_ < row_; column_ += TILE)                                \
            for (Py_ssize_t r_ = band_, first = 0, last = 0; r_ < band_ + BAND && r_ < rows_; r_++)  \
                if (first = r_ * row_ + column_, last = r_ * row_ + (row_ - column_ < TILE ? row_ : column_ + TILE), 1)

/* Asks for the cache lines of a point's taps (the first of each row of taps) ahead of the reads:
   the gathers of a run of points then overlap instead of waiting one by one. */
ALWAYS_INLINE void prefetch_taps(const char *p, Py_ssize_t flat, int rank, int taps, Py_ssize_t s0, Py_ssize_t s1,
                                 Py_ssize_t size)
{
#if defined(__GNUC__)
    if (rank == 1) {
        __builtin_prefetch(p + flat * size);
    } else if (rank == 2) {
        for (int j = 0; j < taps; j++)
            __builtin_prefetch(p + (flat + j * s0) * size);
    } else {
        for (int l = 0; l < taps; l++)
            for (int j = 0; j < taps; j++)
                __builtin_prefetch(p + (flat + l * s0 + j * s1) * size);
    }
#else
    (void)p, (void)flat, (void)rank, (void)taps, (void)s0, (void)s1, (void)size;
#endif
}

/* Rounding to a whole number without a conversion to an integer (which the compiler does not make
   into vector code here): the shift by MAGIC (_to_dtype.h) gives rint(v) for |v| < 2**51 (NEAR);
   floor is one less where that rounded up. Positions further out, NaN and Inf go through
   harmlessly and are marked for the general path. */
#define NEAR 0x1p51

/* One axis of a run of points (positions x): per point whether its taps all lie inside (inside
   is multiplied by 1.0 or 0.0), whether they all lie outside with zeros padding (away is raised
   to 1.0 where they do; near multiplied by 0.0 where |x| >= 2**51, past which the rounding
   above is not exact), the first tap's index and the weights. Functions of their own with plain
   arrays: inlined into the callers, the loops stay scalar. */
#define POSITIONS(low, far_low, far_end)                                                              \
    double v = x[q];                                                                                  \
    double r = (v + MAGIC) - MAGIC;                                                                   \
    double f = r > v ? r - 1 : r;                                                                     \
    double t = v - f;                                                                                 \
    inside[q] *= (v >= (low)) & (v < end) ? 1.0 : 0.0;                                                \
    away[q] = zeros && ((v < (far_low)) | (v >= (far_end))) ? 1.0 : away[q];                           \
    near[q] *= fabs(v) < NEAR ? 1.0 : 0.0

/* taps floor(x), floor(x) + 1: all inside for x in [0, L - 1) (which border and reflection leave
   as it is), all outside for x < -1 or x >= L */
#define LINEAR_AXIS(NAME, TARGET)                                                                     \
    TARGET NOINLINE void NAME(int n, const double *restrict x, Py_ssize_t length, int zeros,            \
                              double (*restrict w)[TILE], double *restrict index, double *restrict inside, \
                              double *restrict away, double *restrict near)                           \
    {                                                                                                 \
        const double end = (double)(length - 1), far_end = (double)length;                            \
        for (int q = 0; q < n; q++) {                                                                 \
            POSITIONS(0.0, -1.0, far_end);                                                            \
            w[0][q] = 1 - t;                                                                          \
            w[1][q] = t;                                                                              \
            index[q] = f;                                                                             \
        }                                                                                             \
    }
LINEAR_AXIS(linear_axis, )
#if AVX2
LINEAR_AXIS(linear_axis_avx2, AVX2_TARGET) /* the same loop, 4 points a vector */
#endif

/* taps floor(x) - 1 .. floor(x) + 2: all inside for x in [1, L - 2), all outside for x < -2 or
   x >= L + 1 */
NOINLINE void cubic_axis(int n, const double *restrict x, Py_ssize_t length, int zeros, double (*restrict w)[TILE],
                          double *restrict index, double *restrict inside, double *restrict away,
                          double *restrict near)
{
    const double end = (double)(length - 2), far_end = (double)(length + 1);
    for (int q = 0; q < n; q++) {
        POSITIONS(1.0, -2.0, far_end);
        w[0][q] = cubic_far(t + 1);
        w[1][q] = cubic_near(t);
        w[2][q] = cubic_near(1 - t);
        w[3][q] = cubic_far(2 - t);
        index[q] = f - 1;
    }
}

/* the tap rint(x): inside for x in [0, L - 1], outside for rint(x) < 0 or > L - 1 */
NOINLINE void nearest_axis(int n, const double *restrict x, Py_ssize_t length, int zeros, double *restrict index,
                           double *restrict inside, double *restrict away, double *restrict near)
{
    const double last = (double)(length - 1);
    for (int q = 0; q < n; q++) {
        double v = x[q];
        double r = (v + MAGIC) - MAGIC;
        inside[q] *= (v >= 0.0) & (v <= last) ? 1.0 : 0.0;
        away[q] = zeros && ((r < 0.0) | (r > last)) ? 1.0 : away[q];
        near[q] *= fabs(v) < NEAR ? 1.0 : 0.0;
        index[q] = r;
    }
}

/* The points of a run sorted three ways, their positions found axis by axis over the run in
   loops of the same operations on every point, which the compiler makes into vector code (each
   lane does what the scalar code does: the same bits): the interior points (their first taps'
   flat indices and weights), the points whose taps all read fill (zeros padding; their value is
   fill interpolated by their weights, the same in every channel), and the rest, for the general
   path (an edge band, and positions that are not finite or lie very far out). */
typedef struct {
    int count, aways, others;
    Py_ssize_t point[TILE], flat[TILE]; /* interior: each one's number and first tap's flat index */
    double weight[TILE][MAX_RANK][4];
    Py_ssize_t away[TILE];              /* all fill: each one's number and value */
    double away_value[TILE];
    Py_ssize_t other[TILE];
} Run;

/* A run's positions, axis by axis (outermost first): each point's weights and first tap on each
   axis, and its marks (see POSITIONS): inside, away (all fill), near. */
typedef struct {
    double w[MAX_RANK][4][TILE], index[MAX_RANK][TILE], inside[TILE], away[TILE], near[TILE];
} Positions;

ALWAYS_INLINE void run_positions(const Job *job, Py_ssize_t first, int n, int rank, int mode, Positions *at,
                                 int avx2)
{
    /* doubles throughout, the marks (1.0 or 0.0) and the indices (whole numbers) too: SSE2 has no
       vector compare or conversion between doubles and 64-bit integers */
    double x[TILE];
    double *inside = at->inside, *away = at->away, *near = at->near;
    const int zeros = job->padding == ZEROS;
    for (int q = 0; q < n; q++) {
        inside[q] = near[q] = 1.0;
        away[q] = 0.0;
    }
    for (int a = 0; a < rank; a++) {
        const Py_ssize_t length = job->length[a];
        const Py_ssize_t step = job->coord_point;
        if (job->coords == NULL) {
            affine_coordinates(job, first, n, rank - 1 - a, x);
        } else if (job->coords_double) {
            const char *from = job->coords + first * step + (rank - 1 - a) * job->coord_axis;
            for (int q = 0; q < n; q++)
                memcpy(&x[q], from + q * step, sizeof(double));
        } else {
            const char *from = job->coords + first * step + (rank - 1 - a) * job->coord_axis;
            for (int q = 0; q < n; q++) {
                float single;
                memcpy(&single, from + q * step, sizeof single);
                x[q] = single;
            }
        }
        if (job->align) {
            const double span = (double)(length - 1);
            for (int q = 0; q < n; q++)
                x[q] = (x[q] + 1) / 2 * span;
        } else {
            const double whole = (double)length;
            for (int q = 0; q < n; q++)
                x[q] = ((x[q] + 1) * whole - 1) / 2;
        }
        if (length >= ((Py_ssize_t)1 << 51)) { /* no such array: but no point is then taken here */
            for (int q = 0; q < n; q++)
                inside[q] = near[q] = 0.0;
            continue;
        }
        if (mode == CUBIC)
            cubic_axis(n, x, length, zeros, at->w[a], at->index[a], inside, away, near);
        else if (mode == LINEAR) {
#if AVX2
            if (avx2) {
                linear_axis_avx2(n, x, length, zeros, at->w[a], at->index[a], inside, away, near);
                continue;
            }
#endif
            (void)avx2;
            linear_axis(n, x, length, zeros, at->w[a], at->index[a], inside, away, near);
        }
        else
            nearest_axis(n, x, length, zeros, at->index[a], inside, away, near);
    }
}

/* fill interpolated by point q's weights, innermost axis first, each sum in tap order: what the
   lattice of taps that all read fill (0 where one of a tap's weights is 0: TAP_VALUE) gives, the
   same operations, the same values at each level: level where no outer weight is 0, zero where one is */
ALWAYS_INLINE double away_value(const Job *job, const Positions *at, int q, int rank, int taps)
{
    double level = job->fill, zero = 0.0;
    for (int a = rank - 1; a >= 0; a--) {
        double w = at->w[a][0][q];
        double total = w * (w == 0.0 ? zero : level), total_zero = w * zero;
        for (int j = 1; j < taps; j++) {
            w = at->w[a][j][q];
            total = total + w * (w == 0.0 ? zero : level);
            total_zero = total_zero + w * zero;
        }
        level = total;
        zero = total_zero;
    }
    return level;
}

ALWAYS_INLINE void interior_run(const Job *job, Py_ssize_t first, int n, int rank, int mode, Run *run)
{
    Positions at;
    run_positions(job, first, n, rank, mode, &at, 0);
    const int taps = mode == CUBIC ? 4 : mode == LINEAR ? 2 : 0;
    run->count = run->aways = run->others = 0;
    for (int q = 0; q < n; q++) {
        if (at.inside[q] != 0.0) {
            int k = run->count++;
            Py_ssize_t flat = 0;
            for (int a = 0; a < rank; a++) {
                flat += (Py_ssize_t)at.index[a][q] * job->stride[a];
                for (int j = 0; j < taps; j++)
                    run->weight[k][a][j] = at.w[a][j][q];
            }
            run->point[k] = first + q;
            run->flat[k] = flat;
        } else if (at.away[q] != 0.0 && at.near[q] != 0.0) {
            run->away[run->aways] = first + q;
            run->away_value[run->aways++] = mode == NEAREST ? job->fill : away_value(job, &at, q, rank, taps);
        } else {
            run->other[run->others++] = first + q;
        }
    }
}

/* --- float16, and the integers' rounding (geomcli.ops._numeric.to_dtype) --------------------- */

static double half_to_double(uint16_t h)
{
    double sign = (h & 0x8000u) ? -1.0 : 1.0;
    unsigned exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
    if (exponent == 0)
        return sign * ldexp((double)mantissa, -24);
    if (exponent == 31) {
        if (mantissa == 0)
            return sign * HUGE_VAL;
        uint64_t bits = ((uint64_t)(h & 0x8000u) << 48) | 0x7ff0000000000000ull | ((uint64_t)mantissa << 42);
        double nan;
        memcpy(&nan, &bits, sizeof nan);
        return nan;
    }
    return sign * ldexp((double)(mantissa | 0x400u), (int)exponent - 25);
}

/* double -> float16 rounded once, to nearest, ties to even (numpy's cast) */
static uint16_t double_to_half(double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    uint16_t sign = (uint16_t)((bits >> 48) & 0x8000u);
    if (isnan(v)) {
        uint16_t payload = (uint16_t)((bits >> 42) & 0x3ffu);
        return (uint16_t)(sign | 0x7c00u | (payload ? payload : 1u));
    }
    double a = fabs(v);
    if (a >= 65520.0) /* 65504 plus half an ulp rounds (to even) past the largest */
        return (uint16_t)(sign | 0x7c00u);
    if (a < 0x1p-14) /* subnormal: a whole number of 2**-24 (1024 of them is the smallest normal) */
        return (uint16_t)(sign | (uint16_t)rint(a * 0x1p24));
    int exponent;
    frexp(a, &exponent); /* a in [2**(e-1), 2**e) */
    exponent -= 1;
    double mantissa = rint(ldexp(a, 10 - exponent)); /* 1024 .. 2048, exactly scaled */
    return (uint16_t)(sign | (uint16_t)(((exponent + 15) << 10) + (int)mantissa - 1024));
}

/* fill interpolated by a point's weights, innermost axis first, each sum in tap order: what the
   lattice gives when every tap reads fill (0 where one of its weights is 0), as away_value */
static double interpolated_fill(const Axis *ax, int rank, double fill)
{
    double level = fill, zero = 0.0;
    for (int a = rank - 1; a >= 0; a--) {
        double w = ax[a].weight[0];
        double total = w * (w == 0.0 ? zero : level), total_zero = w * zero;
        for (int k = 1; k < ax[a].count; k++) {
            w = ax[a].weight[k];
            total = total + w * (w == 0.0 ? zero : level);
            total_zero = total_zero + w * zero;
        }
        level = total;
        zero = total_zero;
    }
    return level;
}

/* --- rows of interior taps as pairs of doubles (SSE2) ------------------------------------------ */

#if VECTORS
/* An interior point's taps on the innermost axis are neighbours in memory: a row of 2 or 4 of
   them is read as 1 or 2 pairs of doubles, exactly (every conversion here is exact). Then the
   sums along the rows go two rows at a time, one per lane, each lane doing what the scalar code
   does in the same order: the same bits. */
ALWAYS_INLINE void row_f64(const char *p, int taps, __m128d *a, __m128d *b)
{
    *a = _mm_loadu_pd((const double *)p);
    if (taps == 4)
        *b = _mm_loadu_pd((const double *)p + 2);
}

ALWAYS_INLINE void row_f32(const char *p, int taps, __m128d *a, __m128d *b)
{
    if (taps == 2) {
        *a = _mm_cvtps_pd(_mm_castpd_ps(_mm_load_sd((const double *)p)));
        return;
    }
    __m128 four = _mm_loadu_ps((const float *)p);
    *a = _mm_cvtps_pd(four);
    *b = _mm_cvtps_pd(_mm_movehl_ps(four, four));
}

ALWAYS_INLINE void row_u8(const char *p, int taps, __m128d *a, __m128d *b)
{
    uint32_t bytes = 0;
    memcpy(&bytes, p, (size_t)taps);
    __m128i zero = _mm_setzero_si128();
    __m128i wide = _mm_unpacklo_epi16(_mm_unpacklo_epi8(_mm_cvtsi32_si128((int)bytes), zero), zero);
    *a = _mm_cvtepi32_pd(wide);
    if (taps == 4)
        *b = _mm_cvtepi32_pd(_mm_shuffle_epi32(wide, _MM_SHUFFLE(3, 2, 3, 2)));
}

ALWAYS_INLINE double low_lane(__m128d v) { return _mm_cvtsd_f64(v); }
ALWAYS_INLINE double high_lane(__m128d v) { return _mm_cvtsd_f64(_mm_unpackhi_pd(v, v)); }

/* sum over k of weight[k] * v_k, left to right, for the row(s) given as pairs: a = (v0, v1),
   b = (v2, v3); as a total of the lanes of weight * row */
ALWAYS_INLINE double row_sum(__m128d a, __m128d b, const double *weight, int taps)
{
    __m128d first = _mm_mul_pd(_mm_loadu_pd(weight), a);
    double total = low_lane(first) + high_lane(first);
    if (taps == 4) {
        __m128d second = _mm_mul_pd(_mm_loadu_pd(weight + 2), b);
        total = total + low_lane(second);
        total = total + high_lane(second);
    }
    return total;
}

/* two rows' sums, one per lane: rows (a0, b0) and (a1, b1) */
ALWAYS_INLINE __m128d row_sums(__m128d a0, __m128d b0, __m128d a1, __m128d b1, const double *weight, int taps)
{
    __m128d sums = _mm_mul_pd(_mm_set1_pd(weight[0]), _mm_unpacklo_pd(a0, a1));
    sums = _mm_add_pd(sums, _mm_mul_pd(_mm_set1_pd(weight[1]), _mm_unpackhi_pd(a0, a1)));
    if (taps == 4) {
        sums = _mm_add_pd(sums, _mm_mul_pd(_mm_set1_pd(weight[2]), _mm_unpacklo_pd(b0, b1)));
        sums = _mm_add_pd(sums, _mm_mul_pd(_mm_set1_pd(weight[3]), _mm_unpackhi_pd(b0, b1)));
    }
    return sums;
}

#define ROW_GENERIC(NAME) NAME##_row
#define ROW_F64(NAME) row_f64
#define ROW_F32(NAME) row_f32
#define ROW_U8(NAME) row_u8
#endif

/* --- the interpolation, per data type -------------------------------------------------------- */

/* The lattice of a point's tap values contracted innermost axis first, each sum in tap order, each
   term weight * value, as reference.grid_sample does. VALUE(offset, outside) reads a tap, AT(a, k)
   is tap k's offset on axis a, OUT(a, k) whether it lies outside, LOADFN reads an item. rank and taps are constants
   where this is expanded. */
#define LATTICE(total, rank, taps, weight, AT, OUT, VALUE, LOADFN)                                            \
    do {                                                                                              \
        if ((rank) == 1) {                                                                            \
            for (int i = 0; i < (taps); i++) {                                                        \
                double term = weight[0][i] * VALUE(LOADFN, AT(0, i), OUT(0, i));                              \
                total = i == 0 ? term : total + term;                                                 \
            }                                                                                         \
        } else if ((rank) == 2) {                                                                     \
            for (int j = 0; j < (taps); j++) {                                                        \
                double row = 0.0;                                                                     \
                for (int i = 0; i < (taps); i++) {                                                    \
                    double term = weight[1][i] * VALUE(LOADFN, AT(0, j) + AT(1, i), OUT(0, j) | OUT(1, i));   \
                    row = i == 0 ? term : row + term;                                                 \
                }                                                                                     \
                double term = weight[0][j] * row;                                                     \
                total = j == 0 ? term : total + term;                                                 \
            }                                                                                         \
        } else {                                                                                      \
            for (int l = 0; l < (taps); l++) {                                                        \
                double plane = 0.0;                                                                   \
                for (int j = 0; j < (taps); j++) {                                                    \
                    double row = 0.0;                                                                 \
                    for (int i = 0; i < (taps); i++) {                                                \
                        double term = weight[2][i] * VALUE(LOADFN, AT(0, l) + AT(1, j) + AT(2, i),    \
                                                           OUT(0, l) | OUT(1, j) | OUT(2, i));        \
                        row = i == 0 ? term : row + term;                                             \
                    }                                                                                 \
                    double term = weight[1][j] * row;                                                 \
                    plane = j == 0 ? term : plane + term;                                             \
                }                                                                                     \
                double term = weight[0][l] * plane;                                                   \
                total = l == 0 ? term : total + term;                                                 \
            }                                                                                         \
        }                                                                                             \
    } while (0)

/* An interior point's value in one channel (p: the channel's first item; flat: the first tap's
   index; s0, s1: the strides of the outer axes), the same operations as LATTICE's. */
#if VECTORS
#define INTERIOR(NAME, T, ROW)                                                                        \
    ALWAYS_INLINE void NAME##_row(const char *p, int taps, __m128d *a, __m128d *b)                    \
    {                                                                                                 \
        *a = _mm_set_pd(NAME##_load(p, 1), NAME##_load(p, 0));                                        \
        if (taps == 4)                                                                                \
            *b = _mm_set_pd(NAME##_load(p, 3), NAME##_load(p, 2));                                    \
    }                                                                                                 \
    /* rows [0, taps) of a plane of taps, s bytes apart: the sum of weight[j] * row j's sum */       \
    ALWAYS_INLINE double NAME##_plane(const char *p, Py_ssize_t s, const double *outer, const double *inner, \
                                      int taps)                                                       \
    {                                                                                                 \
        __m128d a0, a1, b0 = _mm_setzero_pd(), b1 = b0;                                               \
        ROW(NAME)(p, taps, &a0, &b0);                                                                 \
        ROW(NAME)(p + s, taps, &a1, &b1);                                                             \
        __m128d first = _mm_mul_pd(_mm_loadu_pd(outer), row_sums(a0, b0, a1, b1, inner, taps));       \
        double total = low_lane(first) + high_lane(first);                                            \
        if (taps == 4) {                                                                              \
            __m128d a2, a3, b2 = b0, b3 = b0;                                                         \
            ROW(NAME)(p + 2 * s, taps, &a2, &b2);                                                     \
            ROW(NAME)(p + 3 * s, taps, &a3, &b3);                                                     \
            __m128d second = _mm_mul_pd(_mm_loadu_pd(outer + 2), row_sums(a2, b2, a3, b3, inner, taps)); \
            total = total + low_lane(second);                                                         \
            total = total + high_lane(second);                                                        \
        }                                                                                             \
        return total;                                                                                 \
    }                                                                                                 \
    ALWAYS_INLINE double NAME##_interior(const char *p0, Py_ssize_t flat, int rank, int taps, Py_ssize_t s0, \
                                         Py_ssize_t s1, double weight[MAX_RANK][4])                   \
    {                                                                                                 \
        const Py_ssize_t size = (Py_ssize_t)sizeof(T);                                                \
        const char *p = p0 + flat * size;                                                             \
        if (rank == 1) {                                                                              \
            __m128d a, b = _mm_setzero_pd();                                                          \
            ROW(NAME)(p, taps, &a, &b);                                                               \
            return row_sum(a, b, weight[0], taps);                                                    \
        }                                                                                             \
        if (rank == 2)                                                                                \
            return NAME##_plane(p, s0 * size, weight[0], weight[1], taps);                            \
        double total = 0.0;                                                                           \
        for (int l = 0; l < taps; l++) {                                                              \
            double term = weight[0][l] * NAME##_plane(p + l * s0 * size, s1 * size, weight[1], weight[2], taps); \
            total = l == 0 ? term : total + term;                                                     \
        }                                                                                             \
        return total;                                                                                 \
    }                                                                                                 \
    /* the taps at p and p + step (bytes) as a pair: a row of neighbours, or two loads */            \
    ALWAYS_INLINE __m128d NAME##_pair(const char *p, Py_ssize_t step, int adjacent)                   \
    {                                                                                                 \
        __m128d a, b = _mm_setzero_pd();                                                              \
        if (!adjacent)                                                                                \
            return _mm_set_pd(NAME##_load(p + step, 0), NAME##_load(p, 0));                           \
        ROW(NAME)(p, 2, &a, &b);                                                                      \
        return a;                                                                                     \
    }                                                                                                 \
    /* a 2-D linear interior point in one channel: taps p, p + step and the same a row (rows bytes) \
       on, the same operations as LATTICE's */                                                       \
    ALWAYS_INLINE double NAME##_linear2_value(const char *p, Py_ssize_t rows, Py_ssize_t step, int adjacent, \
                                              const double *wy, const double *wx)                     \
    {                                                                                                 \
        const __m128d none = _mm_setzero_pd();                                                        \
        __m128d sums = row_sums(NAME##_pair(p, step, adjacent), none, NAME##_pair(p + rows, step, adjacent), \
                                none, wx, 2);                                                         \
        __m128d first = _mm_mul_pd(_mm_loadu_pd(wy), sums);                                           \
        return low_lane(first) + high_lane(first);                                                    \
    }
#else
#define INTERIOR(NAME, T, ROW)                                                                        \
    ALWAYS_INLINE double NAME##_interior(const char *p0, Py_ssize_t flat, int rank, int taps, Py_ssize_t s0, \
                                         Py_ssize_t s1, double weight[MAX_RANK][4])                   \
    {                                                                                                 \
        double total = 0.0;                                                                           \
        LATTICE(total, rank, taps, weight, STEP_AT, NO_OUT, STEP_VALUE, NAME##_load);                 \
        return total;                                                                                 \
    }                                                                                                 \
    ALWAYS_INLINE double NAME##_linear2_value(const char *p, Py_ssize_t rows, Py_ssize_t step, int adjacent, \
                                              const double *wy, const double *wx)                     \
    {                                                                                                 \
        (void)adjacent;                                                                               \
        double row0 = wx[0] * NAME##_load(p, 0);                                                      \
        row0 = row0 + wx[1] * NAME##_load(p + step, 0);                                               \
        double row1 = wx[0] * NAME##_load(p + rows, 0);                                               \
        row1 = row1 + wx[1] * NAME##_load(p + rows + step, 0);                                        \
        double total = wy[0] * row0;                                                                  \
        return total + wy[1] * row1;                                                                  \
    }
#define ROW_GENERIC(NAME)
#define ROW_F64(NAME)
#define ROW_F32(NAME)
#define ROW_U8(NAME)
#endif

/* Per data type T (LOAD makes a double of an item, STORE an item of a double): the interior
   points, the others (general: each tap padded on its own), and the run over a job's points. */
#define KIND(NAME, T, LOAD, STORE, ROW)                                                               \
    ALWAYS_INLINE double NAME##_load(const char *p, Py_ssize_t offset)                               \
    {                                                                                                 \
        T item;                                                                                       \
        memcpy(&item, p + offset * (Py_ssize_t)sizeof(T), sizeof item);                              \
        return LOAD(item);                                                                            \
    }                                                                                                 \
    INTERIOR(NAME, T, ROW)                                                                            \
    ALWAYS_INLINE void NAME##_store(char *out, double value)                                          \
    {                                                                                                 \
        T item = STORE(value);                                                                        \
        memcpy(out, &item, sizeof item);                                                              \
    }                                                                                                 \
    ALWAYS_INLINE void NAME##_taps(const Job *job, const Axis *ax, char *out, int rank, int taps,     \
                                   int check)                                                         \
    {                                                                                                 \
        double weight[MAX_RANK][4];                                                                   \
        for (int a = 0; a < rank; a++)                                                                \
            for (int k = 0; k < taps; k++)                                                            \
                weight[a][k] = ax[a].weight[k];                                                       \
        for (Py_ssize_t c = 0; c < job->channels; c++) {                                              \
            const char *p = job->data + c * job->plane * (Py_ssize_t)sizeof(T);                       \
            double total = 0.0;                                                                       \
            LATTICE(total, rank, taps, weight, TAP_AT, TAP_OUT, TAP_VALUE, NAME##_load);              \
            NAME##_store(out + c * job->out_channel, total);                                          \
        }                                                                                             \
    }                                                                                                 \
    static void NAME##_general(const Job *job, Py_ssize_t p, char *out)                               \
    {                                                                                                 \
        Axis ax[MAX_RANK];                                                                            \
        int any;                                                                                      \
        double value = job->fill; /* a position not finite: the point reads fill */                  \
        if (point_taps(job, p, ax, &any)) {                                                           \
            int away = 0; /* an axis whose taps all read fill: so do all the lattice's */             \
            for (int a = 0; a < job->rank && any; a++) {                                              \
                int all = 1;                                                                          \
                for (int k = 0; k < ax[a].count; k++)                                                 \
                    all &= ax[a].outside[k] & 1;                                                          \
                away |= all;                                                                          \
            }                                                                                         \
            if (!away) {                                                                              \
                int cubic = job->mode == CUBIC;                                                       \
                switch (job->rank * 4 + cubic * 2 + any) {                                            \
                case 4: NAME##_taps(job, ax, out, 1, 2, 0); break;                                    \
                case 5: NAME##_taps(job, ax, out, 1, 2, 1); break;                                    \
                case 6: NAME##_taps(job, ax, out, 1, 4, 0); break;                                    \
                case 7: NAME##_taps(job, ax, out, 1, 4, 1); break;                                    \
                case 8: NAME##_taps(job, ax, out, 2, 2, 0); break;                                    \
                case 9: NAME##_taps(job, ax, out, 2, 2, 1); break;                                    \
                case 10: NAME##_taps(job, ax, out, 2, 4, 0); break;                                   \
                case 11: NAME##_taps(job, ax, out, 2, 4, 1); break;                                   \
                case 12: NAME##_taps(job, ax, out, 3, 2, 0); break;                                   \
                case 13: NAME##_taps(job, ax, out, 3, 2, 1); break;                                   \
                case 14: NAME##_taps(job, ax, out, 3, 4, 0); break;                                   \
                default: NAME##_taps(job, ax, out, 3, 4, 1); break;                                   \
                }                                                                                     \
                return;                                                                               \
            }                                                                                         \
            value = interpolated_fill(ax, job->rank, job->fill);                                      \
        }                                                                                             \
        for (Py_ssize_t c = 0; c < job->channels; c++)                                                \
            NAME##_store(out + c * job->out_channel, value);                                          \
    }                                                                                                 \
    /* Each run in two passes: the positions, weights and first taps of its interior points (the \
       others done on their own), their taps' lines asked for; then per channel the gathers and    \
       sums, independent from point to point, so that many reads are in flight at once. */         \
    ALWAYS_INLINE void NAME##_points(const Job *job, int rank, int mode)                              \
    {                                                                                                 \
        const int taps = mode == CUBIC ? 4 : 2;                                                       \
        const Py_ssize_t s0 = job->stride[0], s1 = rank > 1 ? job->stride[1] : 0;                     \
        const Py_ssize_t size = (Py_ssize_t)sizeof(T), plane = job->plane * size;                     \
        Run run;                                                                                      \
        FOR_RUNS(job, first, last) {                                                                  \
            interior_run(job, first, (int)(last - first), rank, mode, &run);                          \
            for (int k = 0; k < run.count; k++)                                                       \
                prefetch_taps(job->data, run.flat[k], rank, taps, s0, s1, size);                      \
            for (int k = 0; k < run.others; k++)                                                      \
                NAME##_general(job, run.other[k], job->out + run.other[k] * job->out_point);          \
            for (int k = 0; k < run.aways; k++)                                                       \
                for (Py_ssize_t c = 0; c < job->channels; c++)                                        \
                    NAME##_store(job->out + c * job->out_channel + run.away[k] * job->out_point,       \
                                 run.away_value[k]);                                                  \
            const char *p0 = job->data;                                                               \
            for (Py_ssize_t c = 0; c < job->channels; c++, p0 += plane) {                             \
                char *out = job->out + c * job->out_channel;                                          \
                int ahead = c + 1 < job->channels;                                                    \
                for (int q = 0; q < run.count; q++) { /* not i, j or l: LATTICE's loops */           \
                    Py_ssize_t flat = run.flat[q];                                                    \
                    if (ahead) /* the next channel's, a run's length ahead */                         \
                        prefetch_taps(p0 + plane, flat, rank, taps, s0, s1, size);                    \
                    double total = NAME##_interior(p0, flat, rank, taps, s0, s1, run.weight[q]);      \
                    NAME##_store(out + run.point[q] * job->out_point, total);                         \
                }                                                                                     \
            }                                                                                         \
        }                                                                                             \
    }                                                                                                 \
    /* 2-D linear: each interior point done whole, every channel, as soon as its position is known \
       (nothing staged in a Run), on data of any strides: an H x W x C image is read where it lies, \
       a point's taps of every channel in a cache line or two. */                                 \
    ALWAYS_INLINE void NAME##_linear2_points(const Job *job, int adjacent)                            \
    {                                                                                                 \
        const Py_ssize_t size = (Py_ssize_t)sizeof(T);                                                \
        const Py_ssize_t rows = job->stride[0] * size, step = job->stride[1] * size;                  \
        const Py_ssize_t channel = job->plane * size;                                                 \
        Positions at;                                                                                 \
        Py_ssize_t other[TILE];                                                                       \
        FOR_RUNS(job, first, last) {                                                                  \
            const int n = (int)(last - first);                                                        \
            int others = 0;                                                                           \
            run_positions(job, first, n, 2, LINEAR, &at, 0);                                             \
            for (int q = 0; q < n; q++) {                                                             \
                char *out = job->out + (first + q) * job->out_point;                                  \
                if (at.inside[q] != 0.0) {                                                            \
                    const char *p = job->data + (Py_ssize_t)at.index[0][q] * rows                     \
                                    + (Py_ssize_t)at.index[1][q] * step;                              \
                    const double wy[2] = {at.w[0][0][q], at.w[0][1][q]};                              \
                    const double wx[2] = {at.w[1][0][q], at.w[1][1][q]};                              \
                    for (Py_ssize_t c = 0; c < job->channels; c++, p += channel, out += job->out_channel) \
                        NAME##_store(out, NAME##_linear2_value(p, rows, step, adjacent, wy, wx));     \
                } else if (at.away[q] != 0.0 && at.near[q] != 0.0) {                                  \
                    const double value = away_value(job, &at, q, 2, 2);                               \
                    for (Py_ssize_t c = 0; c < job->channels; c++, out += job->out_channel)           \
                        NAME##_store(out, value);                                                     \
                } else {                                                                              \
                    other[others++] = first + q;                                                      \
                }                                                                                     \
            }                                                                                         \
            for (int k = 0; k < others; k++)                                                          \
                NAME##_general(job, other[k], job->out + other[k] * job->out_point);                  \
        }                                                                                             \
    }                                                                                                 \
        static void NAME##_run(const Job *job)                                                            \
    {                                                                                                 \
        switch (job->rank * 4 + job->mode) {                                                          \
        case 4 + LINEAR: NAME##_points(job, 1, LINEAR); break;                                        \
        case 4 + CUBIC: NAME##_points(job, 1, CUBIC); break;                                          \
        case 8 + LINEAR:                                                                              \
            if (job->stride[1] == 1)                                                                  \
                NAME##_points(job, 2, LINEAR);                                                        \
            else                                                                                      \
                NAME##_linear2_points(job, 0);                                                        \
            break;                                                                                    \
        case 8 + CUBIC: NAME##_points(job, 2, CUBIC); break;                                          \
        case 12 + LINEAR: NAME##_points(job, 3, LINEAR); break;                                       \
        default: NAME##_points(job, 3, CUBIC); break;                                                 \
        }                                                                                             \
    }

/* the general path's taps: each its own offset, fill where outside (check: zeros padding only) */
#define TAP_AT(a, k) ax[a].offset[k]
#define TAP_OUT(a, k) (check ? ax[a].outside[k] : 0)
/* outside: the bits of the lattice tap's axes' taps; fill times a weight of 0 counts as 0 */
#define TAP_VALUE(LOADFN, offset, outside) (((outside) & 1) ? (((outside) & 2) ? 0.0 : job->fill) : LOADFN(p, offset))
/* the interior's: fixed steps from the first tap (flat), the innermost axis's taps neighbours */
#define STEP_AT(a, k) ((k) * ((a) == rank - 1 ? 1 : (a) == 0 ? s0 : s1))
#define NO_OUT(a, k) 0
#define STEP_VALUE(LOADFN, offset, outside) LOADFN(p0, flat + (offset))

#define AS_DOUBLE(v) ((double)(v))

KIND(f32, float, AS_DOUBLE, TO_FLOAT, ROW_F32)
KIND(f64, double, AS_DOUBLE, TO_DOUBLE, ROW_F64)
KIND(f16, uint16_t, half_to_double, double_to_half, ROW_GENERIC)
KIND(u8, uint8_t, AS_DOUBLE, TO_U8, ROW_U8)
KIND(i8, int8_t, AS_DOUBLE, TO_I8, ROW_GENERIC)
KIND(u16, uint16_t, AS_DOUBLE, TO_U16, ROW_GENERIC)
KIND(i16, int16_t, AS_DOUBLE, TO_I16, ROW_GENERIC)
KIND(u32, uint32_t, AS_DOUBLE, TO_U32, ROW_GENERIC)
KIND(i32, int32_t, AS_DOUBLE, TO_I32, ROW_GENERIC)
KIND(u64, uint64_t, AS_DOUBLE, TO_U64, ROW_GENERIC)
KIND(i64, int64_t, AS_DOUBLE, TO_I64, ROW_GENERIC)

#if AVX2
/* --- uint8 with its channels side by side, 2-D linear, AVX2 ----------------------------------- */

/* An H x W x C image (C <= 4) sampled where it lies: a tap's channels are C neighbouring bytes,
   made 4 doubles at once, and each lane does a channel's LATTICE, the same operations in the same
   order: the same bits. Per point this is a few dozen instructions for every channel together;
   the per-channel code took about as many for each channel. Lanes past C hold the next pixel's
   bytes (or 0), computed and dropped. */
AVX2_TARGET ALWAYS_INLINE __m256d u8_pixel(const unsigned char *p, int channels)
{
    /* in a register, no read past the pixel (the image's last byte may end a page): bytes stored
       one by one and read as 4 stall the load behind the stores */
    uint32_t bytes;
    uint16_t two;
    if (channels == 4) {
        memcpy(&bytes, p, 4);
    } else if (channels >= 2) {
        memcpy(&two, p, 2);
        bytes = channels == 3 ? two | (uint32_t)p[2] << 16 : two;
    } else {
        bytes = p[0];
    }
    return _mm256_cvtepi32_pd(_mm_cvtepu8_epi32(_mm_cvtsi32_si128((int)bytes)));
}

AVX2_TARGET ALWAYS_INLINE void u8_channels_points(const Job *job, int channels)
{
    const Py_ssize_t rows = job->stride[0], step = job->stride[1]; /* items are bytes */
    const unsigned char *data = (const unsigned char *)job->data;
    const __m256d low = _mm256_setzero_pd(), high = _mm256_set1_pd(255.0), magic = _mm256_set1_pd(MAGIC);
    const __m128i lowest_bytes = _mm_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    Positions at;
    Py_ssize_t other[TILE], flat[TILE];
    FOR_RUNS(job, first, last) {
        const int n = (int)(last - first);
        int others = 0;
        run_positions(job, first, n, 2, LINEAR, &at, 1);
        for (int q = 0; q < n; q++) {
            /* an inside point's first tap, its two rows' lines asked for (an outside one's index
               is of no use, and a prefetch of it harmless) */
            flat[q] = at.inside[q] != 0.0 ? (Py_ssize_t)at.index[0][q] * rows + (Py_ssize_t)at.index[1][q] * step : 0;
            __builtin_prefetch(data + flat[q]);
            __builtin_prefetch(data + flat[q] + rows);
        }
        for (int q = 0; q < n; q++) {
            char *out = job->out + (first + q) * job->out_point;
            if (at.inside[q] != 0.0) {
                const unsigned char *p = data + flat[q];
                __m256d wx0 = _mm256_broadcast_sd(&at.w[1][0][q]), wx1 = _mm256_broadcast_sd(&at.w[1][1][q]);
                __m256d row0 = _mm256_add_pd(_mm256_mul_pd(wx0, u8_pixel(p, channels)),
                                             _mm256_mul_pd(wx1, u8_pixel(p + step, channels)));
                __m256d row1 = _mm256_add_pd(_mm256_mul_pd(wx0, u8_pixel(p + rows, channels)),
                                             _mm256_mul_pd(wx1, u8_pixel(p + rows + step, channels)));
                __m256d total = _mm256_add_pd(_mm256_mul_pd(_mm256_broadcast_sd(&at.w[0][0][q]), row0),
                                              _mm256_mul_pd(_mm256_broadcast_sd(&at.w[0][1][q]), row1));
                /* saturate(), lane by lane: max and min pick as its selects do (NaN: low), then the
                   rounding by MAGIC, NaN to 0; whole numbers 0..255 convert exactly */
                __m256d c = _mm256_min_pd(_mm256_max_pd(total, low), high);
                c = _mm256_sub_pd(_mm256_add_pd(c, magic), magic);
                c = _mm256_and_pd(c, _mm256_cmp_pd(total, total, _CMP_ORD_Q));
                uint32_t bytes = (uint32_t)_mm_cvtsi128_si32(_mm_shuffle_epi8(_mm256_cvtpd_epi32(c), lowest_bytes));
                if (job->out_channel == 1) {
                    memcpy(out, &bytes, (size_t)channels);
                } else {
                    for (int k = 0; k < channels; k++, bytes >>= 8)
                        out[k * job->out_channel] = (char)(bytes & 0xffu);
                }
            } else if (at.away[q] != 0.0 && at.near[q] != 0.0) {
                const double value = away_value(job, &at, q, 2, 2);
                for (int k = 0; k < channels; k++, out += job->out_channel)
                    u8_store(out, value);
            } else {
                other[others++] = first + q;
            }
        }
        for (int k = 0; k < others; k++)
            u8_general(job, other[k], job->out + other[k] * job->out_point);
    }
}

AVX2_TARGET static void u8_channels_run(const Job *job)
{
    switch (job->channels) { /* a constant count: the loads and stores of a pixel are a move or two */
    case 1: u8_channels_points(job, 1); break;
    case 2: u8_channels_points(job, 2); break;
    case 3: u8_channels_points(job, 3); break;
    default: u8_channels_points(job, 4); break;
    }
}
#endif

/* --- nearest: item-size bytes copied, any type ----------------------------------------------- */

/* In two passes per run as for linear and cubic: each point's pixel (its flat index, or -1 for
   fill), its line asked for; then per channel the copies. */
ALWAYS_INLINE void nearest_points(const Job *job, int rank, Py_ssize_t size)
{
    const Py_ssize_t plane = job->plane * size;
    Py_ssize_t flats[TILE];
    Run run;
    FOR_RUNS(job, first, last) {
        interior_run(job, first, (int)(last - first), rank, NEAREST, &run);
        for (int k = 0; k < run.count; k++) {
            flats[run.point[k] - first] = run.flat[k];
            prefetch_taps(job->data, run.flat[k], 1, 1, 0, 0, size);
        }
        for (int k = 0; k < run.aways; k++)
            flats[run.away[k] - first] = -1;
        for (int k = 0; k < run.others; k++) {
            Axis ax[MAX_RANK];
            int any;
            Py_ssize_t flat = -1;
            if (point_taps(job, run.other[k], ax, &any) && !any) {
                flat = 0;
                for (int a = 0; a < rank; a++)
                    flat += ax[a].offset[0];
            }
            flats[run.other[k] - first] = flat;
        }
        const char *p0 = job->data;
        for (Py_ssize_t c = 0; c < job->channels; c++, p0 += plane) {
            char *out = job->out + c * job->out_channel + first * job->out_point;
            int ahead = c + 1 < job->channels;
            for (Py_ssize_t q = 0; q < last - first; q++, out += job->out_point) {
                Py_ssize_t flat = flats[q];
                if (flat < 0) {
                    memcpy(out, job->fill_bytes, (size_t)size);
                    continue;
                }
                if (ahead)
                    prefetch_taps(p0 + plane, flat, 1, 1, 0, 0, size);
                memcpy(out, p0 + flat * size, (size_t)size);
            }
        }
    }
}

static void nearest_run(const Job *job)
{
    /* a constant size: memcpy becomes one load and one store */
#define NEAREST_SIZES(rank)                                                                           \
    switch (job->itemsize) {                                                                          \
    case 1: nearest_points(job, rank, 1); break;                                                      \
    case 2: nearest_points(job, rank, 2); break;                                                      \
    case 4: nearest_points(job, rank, 4); break;                                                      \
    case 8: nearest_points(job, rank, 8); break;                                                      \
    default: nearest_points(job, rank, job->itemsize); break;                                         \
    }
    if (job->rank == 1) {
        NEAREST_SIZES(1)
    } else if (job->rank == 2) {
        NEAREST_SIZES(2)
    } else {
        NEAREST_SIZES(3)
    }
#undef NEAREST_SIZES
}

/* --- the Python function --------------------------------------------------------------------- */

typedef void (*Runner)(const Job *);

static const struct {
    const char *name;
    Py_ssize_t itemsize;
    Runner run;
} KINDS[] = {
    {"float32", 4, f32_run}, {"float64", 8, f64_run}, {"float16", 2, f16_run}, {"uint8", 1, u8_run},
    {"int8", 1, i8_run},     {"uint16", 2, u16_run},  {"int16", 2, i16_run},   {"uint32", 4, u32_run},
    {"int32", 4, i32_run},   {"uint64", 8, u64_run},  {"int64", 8, i64_run},
};

static int choose(const char *name, const char *const *names, int count, const char *what)
{
    for (int i = 0; i < count; i++)
        if (strcmp(name, names[i]) == 0)
            return i;
    PyErr_Format(PyExc_ValueError, "sample: unknown %s '%s'", what, name);
    return -1;
}

static int is_format(const char *format, char letter)
{
    if (format == NULL)
        return 0;
    if (format[0] == '@' || format[0] == '=' || (format[0] == '<' && PY_LITTLE_ENDIAN) ||
        (format[0] == '>' && PY_BIG_ENDIAN))
        format++;
    return format[0] == letter && format[1] == '\0';
}

PyDoc_STRVAR(sample_doc,
             "sample(plane, coords, out, lengths, mode, padding, align_corners, kind, fill, epsilon, row=0)\n--\n\n"
             "GridSample of one batch item's points: plane (C, D1..Dr) C-contiguous, coords (S, r)\n"
             "float32/float64 with x first, out (C, S) writable; any strides for coords and out.\n"
             "The same bits as geomcli.ops.reference.grid_sample. The GIL is released.");

/* The job's checks and run, for sample (coords given) and sample_affine (coords_obj NULL: job's
   theta and grid fields set) */
static PyObject *run_job(Job job, PyObject *plane_obj, PyObject *coords_obj, PyObject *out_obj, PyObject *lengths_obj,
                         const char *mode_name, const char *padding_name, int align, const char *kind_name,
                         PyObject *fill_obj)
{
    static const char *const modes[] = {"linear", "nearest", "cubic"};
    static const char *const paddings[] = {"zeros", "border", "reflection"};
    if ((job.mode = choose(mode_name, modes, 3, "mode")) < 0 ||
        (job.padding = choose(padding_name, paddings, 3, "padding")) < 0)
        return NULL;
    job.align = align;
    Py_ssize_t rank = PyTuple_GET_SIZE(lengths_obj);
    if (rank < 1 || rank > MAX_RANK) {
        PyErr_Format(PyExc_ValueError, "sample: %zd spatial axes; 1 to %d are compiled", rank, MAX_RANK);
        return NULL;
    }
    job.rank = (int)rank;
    Py_ssize_t items = 1;
    for (Py_ssize_t a = 0; a < rank; a++) {
        Py_ssize_t length = PyLong_AsSsize_t(PyTuple_GET_ITEM(lengths_obj, a));
        if (length == -1 && PyErr_Occurred())
            return NULL;
        if (length < 1) {
            PyErr_SetString(PyExc_ValueError, "sample: every length must be >= 1");
            return NULL;
        }
        job.length[a] = length;
        items *= length;
    }
    for (Py_ssize_t a = rank - 1, stride = 1; a >= 0; a--) {
        job.stride[a] = stride;
        stride *= job.length[a];
    }
    job.plane = items;

    Runner run = NULL;
    Py_ssize_t itemsize = 0;
    if (job.mode == NEAREST) {
        run = nearest_run;
    } else {
        for (size_t i = 0; i < sizeof KINDS / sizeof KINDS[0]; i++)
            if (strcmp(kind_name, KINDS[i].name) == 0) {
                run = KINDS[i].run;
                itemsize = KINDS[i].itemsize;
            }
        if (run == NULL) {
            PyErr_Format(PyExc_ValueError, "sample: dtype %s is not compiled for linear and cubic", kind_name);
            return NULL;
        }
        job.fill = PyFloat_AsDouble(fill_obj);
        if (job.fill == -1.0 && PyErr_Occurred())
            return NULL;
    }

    Py_buffer plane, coords, out;
    memset(&coords, 0, sizeof coords);
    if (PyObject_GetBuffer(plane_obj, &plane, PyBUF_STRIDES) < 0)
        return NULL;
    if (coords_obj != NULL && PyObject_GetBuffer(coords_obj, &coords, PyBUF_STRIDES | PyBUF_FORMAT) < 0) {
        PyBuffer_Release(&plane);
        return NULL;
    }
    if (PyObject_GetBuffer(out_obj, &out, PyBUF_STRIDES | PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&plane);
        if (coords_obj != NULL)
            PyBuffer_Release(&coords);
        return NULL;
    }
    PyObject *result = NULL;
    Py_ssize_t fill_size = 0;
    const char *fill_bytes = NULL;
    double *terms = NULL;
    if (out.ndim != 2 || (coords_obj != NULL && coords.ndim != 2)) {
        PyErr_SetString(PyExc_ValueError, "sample: coords and out must be 2-D");
        goto done;
    }
    job.channels = out.shape[0];
    if (coords_obj == NULL) {
        job.points = out.shape[1];
        if (rank != 2 || job.first_point < 0 || job.grid_height < 1 || job.grid_width < 1 ||
            job.grid_height > PY_SSIZE_T_MAX / job.grid_width ||
            job.points > job.grid_height * job.grid_width - job.first_point) {
            PyErr_SetString(PyExc_ValueError,
                            "sample_affine: 2 lengths, a size (H, W) >= 1, and the points within its grid");
            goto done;
        }
    } else {
        job.points = coords.shape[0];
        if (coords.shape[1] != rank || out.shape[1] != job.points) {
            PyErr_SetString(PyExc_ValueError, "sample: coords must be (S, r) and out (C, S)");
            goto done;
        }
        if (is_format(coords.format, 'd'))
            job.coords_double = 1;
        else if (!is_format(coords.format, 'f')) {
            PyErr_Format(PyExc_ValueError, "sample: coords must be float32 or float64 (format %s)", coords.format);
            goto done;
        }
    }
    if (job.mode == NEAREST)
        itemsize = plane.itemsize;
    if (plane.itemsize != itemsize || out.itemsize != itemsize) {
        PyErr_SetString(PyExc_ValueError, "sample: plane must be (C, D1..Dr) of kind's item size, as out");
        goto done;
    }
    int shaped = plane.ndim == rank + 1 && plane.shape[0] == job.channels;
    for (Py_ssize_t a = 0; shaped && a < rank; a++)
        shaped = plane.shape[a + 1] == job.length[a];
    if (shaped) { /* its own strides, in items */
        for (int a = 0; a <= rank; a++)
            if (plane.strides[a] % itemsize != 0) {
                PyErr_SetString(PyExc_ValueError, "sample: plane's strides must be whole items");
                goto done;
            }
        job.plane = plane.strides[0] / itemsize;
        for (Py_ssize_t a = 0; a < rank; a++)
            job.stride[a] = plane.strides[a + 1] / itemsize;
    } else if (!PyBuffer_IsContiguous(&plane, 'C') || plane.len != job.channels * items * itemsize) {
        PyErr_SetString(PyExc_ValueError, "sample: plane must be (C, D1..Dr) of kind's item size, as out");
        goto done;
    }
    /* the interiors of the other linear and cubic paths read an axis's neighbours as a row */
    if (job.mode != NEAREST && job.stride[rank - 1] != 1 && !(rank == 2 && job.mode == LINEAR)) {
        PyErr_SetString(PyExc_ValueError, "sample: a strided innermost axis takes 2-D linear or nearest only");
        goto done;
    }
    if (job.mode == NEAREST) {
        if (PyBytes_AsStringAndSize(fill_obj, (char **)&fill_bytes, &fill_size) < 0)
            goto done;
        if (fill_size != itemsize) {
            PyErr_SetString(PyExc_ValueError, "sample: nearest's fill must be one item's bytes");
            goto done;
        }
    }
    job.fill_bytes = fill_bytes;
    job.itemsize = itemsize;
    job.data = plane.buf;
    if (coords_obj != NULL) {
        job.coords = coords.buf;
        job.coord_point = coords.strides[0];
        job.coord_axis = coords.strides[1];
    } else if (job.points > 0) {
        job.terms_count = job.points < job.grid_width ? job.points : job.grid_width;
        if ((terms = PyMem_Malloc(2 * (size_t)job.terms_count * sizeof *terms)) == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        affine_terms(&job, terms);
        job.terms[0] = terms;
        job.terms[1] = terms + job.terms_count;
    }
    job.out = out.buf;
    job.out_channel = out.strides[0];
    job.out_point = out.strides[1];
#if AVX2
    if (run == u8_run && rank == 2 && job.mode == LINEAR && (job.plane == 1 || job.channels == 1) && job.channels <= 4 &&
        __builtin_cpu_supports("avx2"))
        run = u8_channels_run;
#endif
    if (job.points > 0 && job.channels > 0) {
        Py_BEGIN_ALLOW_THREADS
        run(&job);
        Py_END_ALLOW_THREADS
    }
    result = Py_NewRef(Py_None);
done:
    PyMem_Free(terms);
    PyBuffer_Release(&plane);
    if (coords_obj != NULL)
        PyBuffer_Release(&coords);
    PyBuffer_Release(&out);
    return result;
}

static PyObject *sample(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *plane_obj, *coords_obj, *out_obj, *lengths_obj, *fill_obj;
    const char *mode_name, *padding_name, *kind_name;
    int align;
    Job job;
    memset(&job, 0, sizeof job);
    if (!PyArg_ParseTuple(args, "OOOO!sspsOd|n:sample", &plane_obj, &coords_obj, &out_obj, &PyTuple_Type,
                          &lengths_obj, &mode_name, &padding_name, &align, &kind_name, &fill_obj, &job.epsilon,
                          &job.row))
        return NULL;
    return run_job(job, plane_obj, coords_obj, out_obj, lengths_obj, mode_name, padding_name, align, kind_name,
                   fill_obj);
}

PyDoc_STRVAR(sample_affine_doc,
             "sample_affine(plane, theta, out, lengths, mode, padding, align_corners, kind, fill, epsilon, row, size,\n"
             "              first, double)\n--\n\n"
             "sample() of 2-D data at AffineGrid's coordinates, made here: theta's 6 values (x's row,\n"
             "then y's) for an output of size (H, W), rounded to float32 (or float64 if double), of\n"
             "the grid's points first .. first + S - 1 (S: out's points). The same bits as\n"
             "sample() of affine_grid's grid. The GIL is released.");

static PyObject *sample_affine(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *plane_obj, *out_obj, *lengths_obj, *fill_obj;
    const char *mode_name, *padding_name, *kind_name;
    int align;
    Job job;
    memset(&job, 0, sizeof job);
    if (!PyArg_ParseTuple(args, "O(dddddd)OO!sspsOdn(nn)np:sample_affine", &plane_obj, &job.theta[0][0],
                          &job.theta[0][1], &job.theta[0][2], &job.theta[1][0], &job.theta[1][1], &job.theta[1][2],
                          &out_obj, &PyTuple_Type, &lengths_obj, &mode_name, &padding_name, &align, &kind_name,
                          &fill_obj, &job.epsilon, &job.row, &job.grid_height, &job.grid_width, &job.first_point,
                          &job.grid_double))
        return NULL;
    return run_job(job, plane_obj, NULL, out_obj, lengths_obj, mode_name, padding_name, align, kind_name, fill_obj);
}

static PyMethodDef methods[] = {
    {"sample", sample, METH_VARARGS, sample_doc},
    {"sample_affine", sample_affine, METH_VARARGS, sample_affine_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_grid_sample",
    "GridSample-22 compiled: the same bits as geomcli.ops.reference.grid_sample (buffer protocol only).",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__grid_sample(void) { return PyModule_Create(&module); }
