/* Shared by the translation units of the native kernels (nativeans.c: the module, the tANS kernels
 * and the scalar rANS kernels; nativeans_simd.c: the AVX2 tANS values kernel and the SIMD rANS
 * kernels). Only what both use: buffers, bit-string reads, the tANS values decoder's structures.
 */
#ifndef ANSFORGE_NATIVEANS_H
#define ANSFORGE_NATIVEANS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <stdlib.h>
#include <math.h>

#if defined(__GNUC__)
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)
#define INLINE static inline __attribute__((always_inline))
#else
#define LIKELY(x) (x)
#define UNLIKELY(x) (x)
#define INLINE static inline
#endif

#define MAXN 16


/* ---------------------------------------------------------------------------------------------- */
/* buffers */

typedef struct {
    Py_buffer view;
    int held;
} Buf;

static inline int get_buf(PyObject *o, Buf *b, int writable, Py_ssize_t itemsize, const char *what) {
    b->held = 0;
    if (PyObject_GetBuffer(o, &b->view, (writable ? PyBUF_WRITABLE : 0) | PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return -1;
    b->held = 1;
    if (itemsize && b->view.itemsize != itemsize) {
        PyErr_Format(PyExc_TypeError, "%s: item size %zd, expected %zd", what, b->view.itemsize, itemsize);
        return -1;
    }
    return 0;
}

static inline void rel(Buf *b) {
    if (b->held) PyBuffer_Release(&b->view);
    b->held = 0;
}

#define NITEMS(b) ((b).view.itemsize ? (b).view.len / (b).view.itemsize : 0)

#if defined(__GNUC__)
#define HIDDEN __attribute__((visibility("hidden")))
#else
#define HIDDEN
#endif

INLINE uint64_t load64_le(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

INLINE uint64_t lowmask(unsigned n) { return n >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << n) - 1); }

/* ---------------------------------------------------------------------------------------------- */
/* the tANS values decoder (nativeans.c) as the SIMD kernels see it */

typedef struct {
    const uint8_t *p;
    int64_t nbytes;
    const uint64_t *tab;
    int64_t L, ntab;
    const int64_t *run_tab, *run_end;
    const int64_t *z;       /* per table */
    const int64_t *esc;     /* ntab * esc_w exponent fields */
    const int64_t *n_esc;   /* per table */
    int64_t esc_w;
    unsigned w, m, top;
    const uint64_t *A;      /* the fast path's tables (see FAST_BODY), or NULL */
    int64_t D;
    const uint64_t *esc_pad; /* ntab * pad_w: escape groups padded to a power of two, shifted, flagged */
    int64_t pad_w;
} ValDec;

#define SV_MAXNEED 25
#define SV_SAFE_LO 512 /* B >= this: the window's first byte (B / 8 - 60) is a byte of the words */
#define SV_KMAX 8      /* segments side by side at most */

typedef struct {
    int64_t B, pos, stop, status;
    uint32_t X[MAXN];
    int done;
} SChain;

typedef struct {
    const uint32_t *tab32; /* ntab * tstride entries as above (table t's entry x at t * tstride + x) */
    const uint32_t *esc32; /* ntab * estride: exponent field << m (table t's group at t * estride) */
    int64_t tstride, estride; /* L and esc_w; the permute kernel's: 256 and max(esc_w, 32) (padded) */
} SimdTab;

/* The SIMD values kernels run chains q[0 .. S-1] to their stops, min(S, SV_KMAX) side by side, one per slot;
 * a slot whose chain is done stores that chain's states (OUT) and takes the next chain of q (IN). The driver
 * orders q longest first, so that the slots run out of chains together rather than one long chain finishing
 * alone, bound by its latency instead of the core's throughput. SLOT_VISIT opens a slot's turn in a kernel's
 * loop over its slots `c` (with `at`, `next`, `active` in scope); IN(c) loads slot c from at[c], OUT(c)
 * stores it there. */
#define SLOT_VISIT(c, h, IN, OUT)                                                                     \
    SChain *h = at[c];                                                                                \
    if (!h) continue;                                                                                 \
    active = 1;                                                                                       \
    if (h->done) {                                                                                    \
        OUT(c);                                                                                       \
        if (next < S) {                                                                               \
            at[c] = q[next++];                                                                        \
            IN(c);                                                                                    \
        } else                                                                                        \
            at[c] = NULL;                                                                             \
        continue;                                                                                     \
    }
#define SLOTS_OPEN(KMAX_, IN)                                                                         \
    const int K = S < (KMAX_) ? (int)S : (KMAX_);                                                     \
    SChain *at[KMAX_];                                                                                \
    int64_t next = K;                                                                                 \
    for (int c = 0; c < K; c++) {                                                                     \
        at[c] = q[c];                                                                                 \
        IN(c);                                                                                        \
    }

/* One chain's place in the runs, the same for both vector widths: the run it is in, where that
 * run's vector zone ends (fend: the run's end or the chain's stop; -1 before the first visit), and
 * the run's value table, escape table and row shift z. */
typedef struct {
    int64_t r, fend, n_esc;
    const uint32_t *tab, *esc;
    unsigned z;
} SRun;

/* Enters the run holding the chain's next pair; 0 (and the chain marked done) at its stop. */
INLINE int srun_enter(const ValDec *d, const SimdTab *st, SChain *h, SRun *u) {
    if (h->pos >= h->stop) { h->done = 1; return 0; }
    while (d->run_end[u->r] <= h->pos) u->r++;
    int64_t t = d->run_tab[u->r];
    u->fend = d->run_end[u->r] < h->stop ? d->run_end[u->r] : h->stop;
    u->tab = st->tab32 + t * st->tstride;
    u->esc = st->esc32 + t * st->estride;
    u->n_esc = d->n_esc[t];
    u->z = (unsigned)d->z[t];
    return 1;
}

/* the scalar values kernel of N states, 16-bit values (nativeans.c): the SIMD kernels' edges */
HIDDEN int64_t nas_val_dec16(int N, const ValDec *d, int64_t *Bp, uint32_t *Xs, int64_t pos, int64_t stop, void *out);
/* the AVX2 values kernel of N = 16 states (nativeans_simd.c; the CPU must have AVX2 and BMI2) */
HIDDEN void nas_avx2_val16(const ValDec *d, const SimdTab *st, SChain **q, int64_t S, uint16_t *out);

/* The permute kernel's entry per (table, state), 32 bits: need (<= 25) in bits 0..4, the direct symbol's
 * exponent field in place (ex << m: bits m .. top - 1, 5 <= m, top <= 17), PV_ESC the escape flag, 32 - nb
 * in bits PV_SNB .. +5, base (< 256) in bits PV_BASE .. 31. */
#define PV_ESC (1 << 17)
#define PV_SNB 18
#define PV_BASE 24

/* the AVX-512 F/BW values kernel of N = 16 states for L <= 256 (nativeans_simd.c; no VBMI, no gathers: the
 * table is looked up with two-register permutes; SimdTab padded to 256 entries and 32 escape exponents) */
HIDDEN void nas_avx512_val16(const ValDec *d, const SimdTab *st, SChain **q, int64_t S, uint16_t *out);

/* The AVX-512 tANS encoder of N = 16 states (nativeans_simd.c): pairs i, i - 1, ... down to lo of one run
 * (symbols u8, additional data u32), 16 at a time, state Y[k] coding pair i - k of each group, bits into
 * the caller's accumulator (acc, cnt <= 7 at entry and exit, output at o). tab: the run's table as 3 x 64
 * int32 (delta, k, base = t * L + cum - f per symbol, for symbols below nsym <= 64); encl: every table's
 * spread with L added, 2 bytes of slack after it. merge: the widest pair is at most 28 bits, so two pairs
 * go into the accumulator at once. Stops before a group with a pair outside its table (the scalar step
 * names it) or when fewer than 144 bytes of output are left; returns the next pair's index. */
HIDDEN int64_t nas_avx512_tans_enc16(const int32_t *tab, int64_t nsym, const uint16_t *encl, const uint8_t *syms,
                                     const uint32_t *exs, int64_t i, int64_t lo, uint32_t *Y, uint64_t *acc,
                                     unsigned *cnt, uint8_t **o, const uint8_t *out_end, int merge);

/* whether gathers are slow on this CPU (nativeans_simd.c; the CPU must have AVX2) */
HIDDEN int nas_gathers_slow(void);

/* SIMD levels (nativeans.c chooses at import; nativeans_simd.c's kernels run at or below them):
 * 0 scalar, 1 AVX2 (+ BMI2, FMA), 2 AVX-512 (F, BW, DQ, VL). */
extern HIDDEN int nas_level;

/* the rANS entries of nativeans_simd.c (the interleaved preset S = 32, W = 16, P = 16) */
HIDDEN PyObject *nas_py_rans16_decode(PyObject *self, PyObject *args);
HIDDEN PyObject *nas_py_rans16_encode(PyObject *self, PyObject *args);
/* nativecrc.c: the container's block CRC */
HIDDEN void nas_crc_init(void);
HIDDEN PyObject *nas_py_crc32_blocks(PyObject *self, PyObject *args);
HIDDEN PyObject *nas_py_crc32_path(PyObject *self, PyObject *args);
/* nativetable.c */
HIDDEN PyObject *nas_py_normalize(PyObject *self, PyObject *args);
HIDDEN PyObject *nas_py_code_table_search(PyObject *self, PyObject *args);

#endif
