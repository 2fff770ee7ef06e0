/* Native tANS and rANS stream kernels (CPython extension `ansforge.model.coding.nativeans`).
 *
 * The same algorithms as the golden coders (tans.py, rans.py) and the numba kernels
 * (numba_kernels.py), bit for bit; `fastans` calls these when the extension is built and the numba
 * kernels otherwise. docs/bitstream.md is the contract; tests/test_native.py checks every entry
 * point against the golden coders and the numba kernels, including corrupt and random inputs.
 *
 * Why C: the kernels are short integer loops; compiled ahead of time they cost nothing at import
 * (numba: ~0.2 s to import and ~0.4 s to load its cached machine code in every process), and C
 * lets the decoder read the word stack as one little-endian bit string with unaligned 64-bit
 * loads (no per-pair refill loop), and keep N interleaved states in registers.
 *
 * The bit string. Words are W-bit, word a at byte a*W/8, little-endian, so the words form one
 * little-endian integer with word h-1 on top. The golden tANS decoder's (h, cnt, buf) state is
 * the bit position B = h*W + cnt: the bits [B, top) are consumed, buf holds bits [h*W, B). Reading
 * a field of n bits is B -= n and taking bits [B, B + n). The golden decoder pops a word only when
 * it lacks bits, so after any pair h = min(h_start, floor(B / W)); the kernel returns B and the
 * caller recovers (h, cnt, buf) from it (tans_state_at).
 *
 * Every array comes in through the buffer protocol (no NumPy headers at build time); the Python
 * side (fastans.py) checks shapes and dtypes before calling, and the kernels check every index
 * that comes from the data (states, symbols, words), so corrupt streams give a status, never an
 * out-of-bounds access. Portable C (C99 + GCC builtins); no -march flags: the wheel runs anywhere.
 */
#include "nativeans.h"
#include <math.h>

/* ISA paths, chosen once at import (choose_isa) */
static int use_pdep = 0, use_bmi2 = 0;
/* the AVX-512 (VBMI) values kernel: the CPU has it, and it runs (`simd` switches it off for tests) */
static int have_simd = 0, use_simd = 0;
/* the SIMD level the CPU has and the one in use (nativeans.h) */
static int have_level = 0;
HIDDEN int nas_level = 0;
/* the AVX2 tANS values kernel: by default only where gathers are fast (nas_gathers_slow), and wherever a
 * level of 1 or more is asked for (simd_level, ANSFORGE_SIMD: tests and benchmarks) */
static int slow_gathers = 0, tans_avx2 = 0;

/* ---------------------------------------------------------------------------------------------- */
/* bit string reads (little-endian bytes p[0 .. nbytes-1]) */


/* bits [B, B + 56) (those past the end read as 0), B >= 0 */
static uint64_t slow_window(const uint8_t *p, int64_t nbytes, int64_t B) {
    int64_t off = B >> 3;
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        if (off + i < nbytes) v |= (uint64_t)p[off + i] << (8 * i);
    return v >> (B & 7);
}

/* bits [B, B + 56): the caller masks the n <= 56 it needs */
INLINE uint64_t window(const uint8_t *p, int64_t nbytes, int64_t B) {
    int64_t off = B >> 3;
    if (LIKELY(off + 8 <= nbytes)) return load64_le(p + off) >> (B & 7);
    return slow_window(p, nbytes, B);
}


/* bits [lo, hi) as an integer, hi - lo <= 64 */
static uint64_t bits_range(const uint8_t *p, int64_t nbytes, int64_t lo, int64_t hi) {
    int64_t n = hi - lo;
    if (n <= 0) return 0;
    if (n <= 56) return window(p, nbytes, lo) & lowmask((unsigned)n);
    uint64_t a = window(p, nbytes, lo) & lowmask(32);
    uint64_t b = window(p, nbytes, lo + 32) & lowmask((unsigned)(n - 32));
    return a | (b << 32);
}

/* ---------------------------------------------------------------------------------------------- */
/* tANS decode
 *
 * Table entry per (table t, state x), built by fastans.PreparedTables: bits 0..31 base[x] (the
 * next state minus the field's low bits), 32..39 nb[x], 40..47 need = nb[x] + k_s (the field
 * width), 48..63 the symbol. For the fused (values) kernel, `hi` per entry holds the output's
 * exponent bits of a direct symbol, or a flag for an escape symbol.
 */

#define E_BASE(e) ((uint32_t)(e))
#define E_NB(e) ((unsigned)((e) >> 32) & 0xffu)
#define E_NEED(e) ((unsigned)((e) >> 40) & 0xffu)
#define E_SYM(e) ((unsigned)((e) >> 48))

typedef struct {
    const uint8_t *p;
    int64_t nbytes;
    const uint64_t *tab; /* ntab * L */
    int64_t L, ntab;
    const int64_t *run_tab, *run_end;
    int64_t n_runs;
} TansDec;

/* Output kinds: symbols u8/i64 with extras u32/u64. */
#define OUT_SE8 0
#define OUT_SE64 1

/* One pair with state X (a local); returns 0, or 1 when the words ran out (nothing consumed). */
#define TANS_STEP(X, OUTIDX)                                                                          \
    do {                                                                                              \
        uint64_t e_ = tab_t[X];                                                                       \
        unsigned need_ = E_NEED(e_);                                                                  \
        if (UNLIKELY((int64_t)need_ > B)) goto ranout;                                                \
        B -= need_;                                                                                   \
        uint64_t f_ = window(p, nbytes, B) & lowmask(need_);                                          \
        unsigned nb_ = E_NB(e_);                                                                      \
        X = E_BASE(e_) + (uint32_t)(f_ & lowmask(nb_));                                               \
        if (KIND == OUT_SE8) {                                                                        \
            ((uint8_t *)out_s)[OUTIDX] = (uint8_t)E_SYM(e_);                                          \
            ((uint32_t *)out_e)[OUTIDX] = (uint32_t)(f_ >> nb_);                                      \
        } else {                                                                                      \
            ((int64_t *)out_s)[OUTIDX] = (int64_t)E_SYM(e_);                                          \
            ((uint64_t *)out_e)[OUTIDX] = f_ >> nb_;                                                  \
        }                                                                                             \
    } while (0)

/* Decode pairs pos .. stop-1 (outputs from pair out0 on: pos >= out0 here); Xs[k] is the state of
 * pair pos + k (rotated by the caller); returns -1 or the pair where the words ran out.
 * N is a compile-time constant in each instantiation, so the states live in registers. */
INLINE int64_t tans_dec_core(const TansDec *d, int64_t *Bp, uint32_t *Xs, const int N, int64_t pos, int64_t stop,
                             void *out_s_, void *out_e_, int64_t out0, const int KIND) {
    const uint8_t *p = d->p;
    const int64_t nbytes = d->nbytes;
    int64_t B = *Bp;
    uint32_t X[MAXN];
    for (int k = 0; k < N; k++) X[k] = Xs[k];
    int64_t r = 0;
    while (d->run_end[r] <= pos) r++;
    int64_t status = -1;
    char *out_s = (char *)out_s_ + (KIND == OUT_SE8 ? 1 : 8) * (pos - out0);
    char *out_e = (char *)out_e_ + (KIND == OUT_SE8 ? 4 : 8) * (pos - out0);
    while (pos < stop) {
        int64_t end = d->run_end[r] < stop ? d->run_end[r] : stop;
        const uint64_t *tab_t = d->tab + d->run_tab[r] * d->L;
        /* whole blocks of N pairs: pair pos + k uses X[k] */
        while (pos + N <= end) {
#pragma GCC unroll 16
            for (int k = 0; k < N; k++) TANS_STEP(X[k], k);
            pos += N;
            out_s += (KIND == OUT_SE8 ? 1 : 8) * N;
            out_e += (KIND == OUT_SE8 ? 4 : 8) * N;
        }
        /* the rest of the run one pair at a time, rotating the states */
        while (pos < end) {
            TANS_STEP(X[0], 0);
            uint32_t x0 = X[0];
            for (int k = 0; k + 1 < N; k++) X[k] = X[k + 1];
            X[N - 1] = x0;
            pos++;
            out_s += (KIND == OUT_SE8 ? 1 : 8);
            out_e += (KIND == OUT_SE8 ? 4 : 8);
        }
        r++;
    }
    goto done;
ranout:
    /* which pair ran out: a block may have been part-way; redo it pair by pair is not needed, the
     * caller only reports the pair, and the block's states are discarded with the error. */
    status = pos;
done:
    for (int k = 0; k < N; k++) Xs[k] = X[k];
    *Bp = B;
    return status;
}

/* The pair where a block's read ran out is reported as the block's first pair; fastans re-runs the
 * failing segment pair by pair (N = 1 kernels of numba or golden) when it needs the exact pair.
 * To keep the message exact without that, tans_decode re-decodes a failing block one pair at a
 * time (below). */

#define DEC_INST(NN)                                                                                  \
    static int64_t tans_dec_n##NN##_k0(const TansDec *d, int64_t *Bp, uint32_t *Xs, int64_t pos,      \
                                       int64_t stop, void *os, void *oe, int64_t out0) {               \
        return tans_dec_core(d, Bp, Xs, NN, pos, stop, os, oe, out0, OUT_SE8);                         \
    }                                                                                                 \
    static int64_t tans_dec_n##NN##_k1(const TansDec *d, int64_t *Bp, uint32_t *Xs, int64_t pos,      \
                                       int64_t stop, void *os, void *oe, int64_t out0) {               \
        return tans_dec_core(d, Bp, Xs, NN, pos, stop, os, oe, out0, OUT_SE64);                        \
    }

DEC_INST(1) DEC_INST(2) DEC_INST(3) DEC_INST(4) DEC_INST(5) DEC_INST(6) DEC_INST(7) DEC_INST(8)
DEC_INST(9) DEC_INST(10) DEC_INST(11) DEC_INST(12) DEC_INST(13) DEC_INST(14) DEC_INST(15) DEC_INST(16)

typedef int64_t (*tans_dec_fn)(const TansDec *, int64_t *, uint32_t *, int64_t, int64_t, void *, void *, int64_t);
#define FN2(NN) {tans_dec_n##NN##_k0, tans_dec_n##NN##_k1}
static const tans_dec_fn TANS_DEC[MAXN + 1][2] = {{0, 0}, FN2(1), FN2(2), FN2(3), FN2(4), FN2(5), FN2(6), FN2(7),
                                                  FN2(8), FN2(9), FN2(10), FN2(11), FN2(12), FN2(13), FN2(14),
                                                  FN2(15), FN2(16)};

/* Pairs before out0 (a checkpoint before the wanted range): decoded without output, one at a time. */
static int64_t tans_skip(const TansDec *d, int64_t *Bp, uint32_t *X, int N, int64_t pos, int64_t stop) {
    int64_t B = *Bp;
    int64_t r = 0;
    while (d->run_end[r] <= pos) r++;
    while (pos < stop) {
        while (d->run_end[r] <= pos) r++;
        const uint64_t *tab_t = d->tab + d->run_tab[r] * d->L;
        uint64_t e = tab_t[X[0]];
        unsigned need = E_NEED(e);
        if ((int64_t)need > B) {
            *Bp = B;
            return pos;
        }
        B -= need;
        uint64_t f = window(d->p, d->nbytes, B) & lowmask(need);
        uint32_t x0 = E_BASE(e) + (uint32_t)(f & lowmask(E_NB(e)));
        for (int k = 0; k + 1 < N; k++) X[k] = X[k + 1];
        X[N - 1] = x0;
        pos++;
    }
    *Bp = B;
    return -1;
}

static int check_runs_arrays(Buf *rt, Buf *re, int64_t ntab, int64_t *n_runs) {
    int64_t n = NITEMS(*rt);
    if (n < 1 || NITEMS(*re) != n) {
        PyErr_SetString(PyExc_ValueError, "run arrays: run_tab and run_end (with its sentinel) differ in size");
        return -1;
    }
    const int64_t *t = (const int64_t *)rt->view.buf;
    for (int64_t i = 0; i < n; i++)
        if (t[i] < 0 || t[i] >= ntab) {
            PyErr_SetString(PyExc_ValueError, "run arrays: table index out of range");
            return -1;
        }
    *n_runs = n;
    return 0;
}

/* tans_decode(words, B, states, lane, tab, L, run_tab, run_end, pos, stop, out_s, out_e, out0)
 *   -> (status, B). states: int64[N] (updated: state of lane k at index k), lane: lane of pair pos.
 * Every table entry's state, symbol and need were checked by the caller (fastans.PreparedTables);
 * states coming from the data are masked into 0 .. L-1 only after the caller checked them
 * (check_checkpoint), and base + low bits < L holds for every legal table. */
static PyObject *py_tans_decode(PyObject *self, PyObject *args) {
    PyObject *ow, *ost, *otab, *ort, *ore, *oos, *ooe;
    long long B, lane, L, pos, stop, out0;
    if (!PyArg_ParseTuple(args, "OLOLOLOOLLOOL", &ow, &B, &ost, &lane, &otab, &L, &ort, &ore, &pos, &stop, &oos, &ooe,
                          &out0))
        return NULL;
    Buf w = {0}, st = {0}, tab = {0}, rt = {0}, re = {0}, os = {0}, oe = {0};
    PyObject *res = NULL;
    if (get_buf(ow, &w, 0, 0, "words") || get_buf(ost, &st, 1, 8, "states") || get_buf(otab, &tab, 0, 8, "table") ||
        get_buf(ort, &rt, 0, 8, "run_tab") || get_buf(ore, &re, 0, 8, "run_end") || get_buf(oos, &os, 1, 0, "out_s") ||
        get_buf(ooe, &oe, 1, 0, "out_e"))
        goto out;
    int64_t N = NITEMS(st);
    int kind = os.view.itemsize == 1 && oe.view.itemsize == 4 ? OUT_SE8
               : os.view.itemsize == 8 && oe.view.itemsize == 8 ? OUT_SE64 : -1;
    int64_t ntab = L > 0 ? NITEMS(tab) / L : 0, n_runs;
    if (N < 1 || N > MAXN || kind < 0 || L < 1 || L > (1 << 16) || ntab < 1 || lane < 0 || lane >= N || pos > stop ||
        out0 > stop || stop - out0 > NITEMS(os) || NITEMS(os) != NITEMS(oe) || B < 0 ||
        B > (int64_t)w.view.len * 8) {
        PyErr_SetString(PyExc_ValueError, "tans_decode: inconsistent arguments");
        goto out;
    }
    if (check_runs_arrays(&rt, &re, ntab, &n_runs)) goto out;
    {
        TansDec d = {(const uint8_t *)w.view.buf, (int64_t)w.view.len, (const uint64_t *)tab.view.buf, L, ntab,
                     (const int64_t *)rt.view.buf, (const int64_t *)re.view.buf, n_runs};
        const int64_t *s64 = (const int64_t *)st.view.buf;
        uint32_t X[MAXN];
        for (int64_t k = 0; k < N; k++) {
            int64_t v = s64[(lane + k) % N];
            if (v < 0 || v >= L) {
                PyErr_SetString(PyExc_ValueError, "tans_decode: state outside the table");
                goto out;
            }
            X[k] = (uint32_t)v;
        }
        int64_t Bv = B, status = -1;
        Py_BEGIN_ALLOW_THREADS
        if (pos < out0) {
            int64_t upto = out0 < stop ? out0 : stop;
            status = tans_skip(&d, &Bv, X, (int)N, pos, upto);
            if (status < 0) pos = upto;
        }
        if (status < 0 && pos < stop) {
            int64_t B0 = Bv;
            uint32_t X0[MAXN];
            memcpy(X0, X, sizeof X);
            status = TANS_DEC[N][kind](&d, &Bv, X, pos, stop, os.view.buf, oe.view.buf, out0);
            if (status >= 0) {
                /* A block ran out: redo from the block's start pair by pair to name the exact pair. The
                 * block's first pair is `status`; states and B are those before it. */
                Bv = B0;
                memcpy(X, X0, sizeof X);
                status = tans_skip(&d, &Bv, X, (int)N, pos, stop);
            }
        }
        Py_END_ALLOW_THREADS
        /* states back in lane order: X[k] is the state of pair done_to + k (lane (done_to + k) mod N) */
        int64_t *sw = (int64_t *)st.view.buf;
        int64_t done_to = status >= 0 ? status : stop;
        for (int64_t k = 0; k < N; k++) sw[(done_to + k) % N] = X[k];
        res = Py_BuildValue("LL", (long long)status, (long long)Bv);
    }
out:
    rel(&w); rel(&st); rel(&tab); rel(&rt); rel(&re); rel(&os); rel(&oe);
    return res;
}

/* ---------------------------------------------------------------------------------------------- */
/* tANS decode straight into values (bit patterns of the tensor's dtype).
 *
 * Entry per (table, state): bits 0..15 base, 16..23 nb, 24..31 need, 32..63 `hi`: the value's
 * exponent field in place (ex << m) for a direct symbol, or ESC for the escape symbol, whose
 * exponent comes from the escape index above the field. Per table: z (the rows' zero mantissa
 * bits, docs/bitstream.md §6 row shifts: the field is w - z bits wide and is shifted back left by z)
 * and its escape group. A value is sign | exponent | mantissa: out = (e >> m) << top | hi | e & mmask.
 */

#define ESC 0xffffffffu
#define V_BASE(e) ((uint32_t)(e) & 0xffffu)
#define V_NB(e) ((unsigned)((e) >> 16) & 0xffu)
#define V_NEED(e) ((unsigned)((e) >> 24) & 0xffu)
#define V_HI(e) ((uint32_t)((e) >> 32))


#define VAL_STEP(X, OUTIDX)                                                                           \
    do {                                                                                              \
        uint64_t e_ = tab_t[X];                                                                       \
        unsigned need_ = V_NEED(e_);                                                                  \
        if (UNLIKELY((int64_t)need_ > B)) goto ranout;                                                \
        B -= need_;                                                                                   \
        uint64_t f_ = window(p, nbytes, B) & lowmask(need_);                                          \
        unsigned nb_ = V_NB(e_);                                                                      \
        X = V_BASE(e_) + (uint32_t)(f_ & lowmask(nb_));                                               \
        uint64_t x_ = f_ >> nb_;                                                                      \
        uint64_t hi_ = V_HI(e_);                                                                      \
        if (UNLIKELY(hi_ == ESC)) {                                                                   \
            uint64_t idx_ = x_ >> wt;                                                                 \
            if (idx_ >= (uint64_t)n_esc_t) goto badesc;                                               \
            hi_ = (uint64_t)esc_t[idx_] << m;                                                         \
            x_ &= lowmask(wt);                                                                        \
        }                                                                                             \
        x_ <<= z;                                                                                     \
        ((OT *)outp)[OUTIDX] = (OT)(((x_ >> m) << top) | hi_ | (x_ & mmask));                         \
    } while (0)

/* The fast path of the values decoder: whole blocks of N pairs of one run, far enough from both ends of
 * the bit string that no read needs a check (B >= N * 56: no block runs out; the 8-byte window
 * stays inside the words). The state is kept as a pointer into the table's block A_t, where A_t[x]
 * holds the address of A_t[base[x]] and A_t[x + D] (D = L, a constant in the L = 256 instances) the
 * fields (need, nb, hi): the next state's entry is then A_t[base] + v, one address computation, which
 * shortens each lane's dependency chain and the instructions per pair (measured: tans8x8 bf16 values
 * ~0.95 -> ~1.15 G pairs per CPU-s here against the same loop with a separate index add).
 * The value is hi | pdep(e, M): `pdep` (BMI2) deposits the additional data's low bits into the sign
 * and mantissa positions M of the value; a row shift z drops M's low z bits (the stored field is
 * w - z bits wide and lands shifted left by z, docs/bitstream.md §6). An escape symbol (hi == ESC)
 * takes its exponent from its padded group (an index outside the group flags the call, which then
 * reports the stream as corrupt). Returns the number of pairs decoded, or -1 for that flag. */
typedef struct {
    uint64_t M;       /* pdep mask: the sign and mantissa bits a field fills (z low bits dropped) */
    uint64_t wzmask;  /* the field's additional-data bits: w - z */
    uint64_t mmask;
    unsigned z, m, top, wt;
    const uint64_t *esc_pad; /* escape index -> exponent field << m; 1 << 63 where outside the group */
    uint64_t pad_mask;
} JoinK;

/* One pair of lane K: its state pointer is the local PK (named variables, not an array, so that the
 * compiler keeps them in registers). */
#define FAST_STEP(PK, K, JOIN, BZHI)                                                                 \
    if (N > K) {                                                                                     \
        const uint64_t *q = PK;                                                                      \
        uint64_t nxt = q[0];                                                                         \
        const uint8_t *fb = (const uint8_t *)(q + FOFF);                                             \
        unsigned need = fb[0], nb = fb[1];                                                           \
        uint32_t hi;                                                                                 \
        memcpy(&hi, fb + 4, 4);                                                                      \
        B -= need;                                                                                   \
        uint64_t f = load64_le(p + (B >> 3)) >> (B & 7);                                             \
        uint64_t v = BZHI(f, nb);                                                                    \
        PK = (const uint64_t *)(uintptr_t)nxt + v;                                                   \
        uint64_t e = f >> nb;                                                                        \
        uint64_t h64 = hi;                                                                           \
        if (UNLIKELY(hi == ESC)) {                                                                   \
            uint64_t x = BZHI(f, need) >> nb;                                                        \
            h64 = jk->esc_pad[(x >> jk->wt) & jk->pad_mask];                                         \
            chk |= h64;                                                                              \
            e = x & jk->wzmask;                                                                      \
        }                                                                                            \
        o[K] = (OT)((JOIN) | h64);                                                                   \
    }

#define FAST_LANES(DO)                                                                               \
    DO(P0, 0) DO(P1, 1) DO(P2, 2) DO(P3, 3) DO(P4, 4) DO(P5, 5) DO(P6, 6) DO(P7, 7)                  \
    DO(P8, 8) DO(P9, 9) DO(P10, 10) DO(P11, 11) DO(P12, 12) DO(P13, 13) DO(P14, 14) DO(P15, 15)

#define FAST_INIT(PK, K) const uint64_t *PK = N > K ? A_t + (int64_t)X[K] : A_t;
#define FAST_FINI(PK, K) if (N > K) X[K] = (uint32_t)(PK - A_t);

#define FAST_BODY_WITH(STEP)                                                                         \
    {                                                                                                \
        int64_t B = *Bp;                                                                             \
        const int64_t safe_hi = (nbytes - 8) * 8, safe_lo = (int64_t)N * 56;                          \
        int64_t done = 0;                                                                            \
        uint64_t chk = 0;                                                                            \
        OT *o = out;                                                                                 \
        FAST_LANES(FAST_INIT)                                                                        \
        while (done + N <= count && B <= safe_hi && B >= safe_lo) {                                  \
            FAST_LANES(STEP)                                                                         \
            o += N;                                                                                  \
            done += N;                                                                               \
        }                                                                                            \
        if (UNLIKELY(chk >> 63)) { *Bp = B; return -1; }                                             \
        FAST_LANES(FAST_FINI)                                                                        \
        *Bp = B;                                                                                     \
        return done;                                                                                 \
    }

#define BZHI_PORTABLE(x, n) ((x) & (((uint64_t)1 << (n)) - 1))
#define BZHI_BMI2(x, n) ((uint64_t)_bzhi_u64((x), (n)))
#define JOIN_PORTABLE ((((e & jk->wzmask) << jk->z) >> jk->m) << jk->top | (((e & jk->wzmask) << jk->z) & jk->mmask))

#define FAST_ARGS const uint8_t *p, int64_t nbytes, int64_t *Bp, uint32_t *X, const uint64_t *A_t, int64_t D, \
                  int64_t count, void *out_, const JoinK *jk

#define FAST_STEP_PORTABLE(PK, K) FAST_STEP(PK, K, JOIN_PORTABLE, BZHI_PORTABLE)
#define FAST_STEP_BMI2(PK, K) FAST_STEP(PK, K, JOIN_PDEP, BZHI_BMI2)

#define FAST_PORTABLE(NAME, OT_, NN, FO)                                                             \
    static int64_t NAME(FAST_ARGS) {                                                                 \
        typedef OT_ OT; OT *out = (OT *)out_; const int N = NN; const int64_t FOFF = FO;             \
        FAST_BODY_WITH(FAST_STEP_PORTABLE)                                                           \
    }

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#define HAVE_PDEP 1
#include <immintrin.h>
#define JOIN_PDEP ((uint64_t)_pdep_u64(e, jk->M))
#define FAST_BMI2(NAME, OT_, NN, FO)                                                                 \
    __attribute__((target("bmi2"))) static int64_t NAME(FAST_ARGS) {                                 \
        typedef OT_ OT; OT *out = (OT *)out_; const int N = NN; const int64_t FOFF = FO;             \
        FAST_BODY_WITH(FAST_STEP_BMI2)                                                               \
    }
#endif

typedef int64_t (*fast_fn)(FAST_ARGS);

#ifdef HAVE_PDEP
#define FAST_INST(NN)                                                                                \
    FAST_PORTABLE(fast_p16_##NN, uint16_t, NN, D) FAST_PORTABLE(fast_p32_##NN, uint32_t, NN, D)      \
    FAST_BMI2(fast_b16_##NN, uint16_t, NN, D) FAST_BMI2(fast_b32_##NN, uint32_t, NN, D)              \
    FAST_PORTABLE(fast_q16_##NN, uint16_t, NN, 256) FAST_PORTABLE(fast_q32_##NN, uint32_t, NN, 256)  \
    FAST_BMI2(fast_c16_##NN, uint16_t, NN, 256) FAST_BMI2(fast_c32_##NN, uint32_t, NN, 256)
#define FAST_ROW(NN) {fast_p16_##NN, fast_p32_##NN, fast_b16_##NN, fast_b32_##NN}
#define FAST_ROW256(NN) {fast_q16_##NN, fast_q32_##NN, fast_c16_##NN, fast_c32_##NN}
#else
#define FAST_INST(NN) FAST_PORTABLE(fast_p16_##NN, uint16_t, NN, D) FAST_PORTABLE(fast_p32_##NN, uint32_t, NN, D) \
    FAST_PORTABLE(fast_q16_##NN, uint16_t, NN, 256) FAST_PORTABLE(fast_q32_##NN, uint32_t, NN, 256)
#define FAST_ROW(NN) {fast_p16_##NN, fast_p32_##NN, fast_p16_##NN, fast_p32_##NN}
#define FAST_ROW256(NN) {fast_q16_##NN, fast_q32_##NN, fast_q16_##NN, fast_q32_##NN}
#endif

FAST_INST(1) FAST_INST(2) FAST_INST(3) FAST_INST(4) FAST_INST(5) FAST_INST(6) FAST_INST(7) FAST_INST(8)
FAST_INST(9) FAST_INST(10) FAST_INST(11) FAST_INST(12) FAST_INST(13) FAST_INST(14) FAST_INST(15) FAST_INST(16)

/* [N][out 16/32 bits + 2 * pdep] */
static const fast_fn FAST[MAXN + 1][4] = {{0, 0, 0, 0}, FAST_ROW(1), FAST_ROW(2), FAST_ROW(3), FAST_ROW(4),
                                          FAST_ROW(5), FAST_ROW(6), FAST_ROW(7), FAST_ROW(8), FAST_ROW(9),
                                          FAST_ROW(10), FAST_ROW(11), FAST_ROW(12), FAST_ROW(13), FAST_ROW(14),
                                          FAST_ROW(15), FAST_ROW(16)};
/* the same for tables of L = 256 states (tans8, the paper's core): the fields' offset is a constant */
static const fast_fn FAST256[MAXN + 1][4] = {{0, 0, 0, 0}, FAST_ROW256(1), FAST_ROW256(2), FAST_ROW256(3),
                                             FAST_ROW256(4), FAST_ROW256(5), FAST_ROW256(6), FAST_ROW256(7),
                                             FAST_ROW256(8), FAST_ROW256(9), FAST_ROW256(10), FAST_ROW256(11),
                                             FAST_ROW256(12), FAST_ROW256(13), FAST_ROW256(14), FAST_ROW256(15),
                                             FAST_ROW256(16)};

/* pdep is one fast instruction from Intel Haswell and AMD Zen 3 on; Zen 1/2 run it in microcode
 * (tens of cycles), where the portable shifts win. Chosen once at import. (The other BMI2
 * instructions are fast everywhere: use_bmi2.) */

static void choose_isa(void) {
#ifdef HAVE_PDEP
    __builtin_cpu_init();
    use_bmi2 = __builtin_cpu_supports("bmi2") != 0;
    use_pdep = use_bmi2 && !__builtin_cpu_is("znver1") && !__builtin_cpu_is("znver2");
    /* the AVX-512 values kernel (simd_val16, defined where HAVE_PDEP is) */
    have_simd = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vbmi") &&
                __builtin_cpu_supports("avx512dq") && use_bmi2;
    /* nativeans_simd.c's levels: AVX2 (with BMI2 and FMA), AVX-512 F/BW/DQ/VL (no VBMI needed) */
    if (use_bmi2 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        have_level = 1;
        if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
            have_level = 2;
    }
#endif
    /* ANSFORGE_SIMD caps the level for a whole process (benchmarks, tests in a subprocess): 0 or
     * "scalar", 1 or "avx2", 2 or "avx512"; unset, the CPU's best. `simd_level` does the same at run time. */
    int cap = 2;
    const char *env = getenv("ANSFORGE_SIMD");
    if (env && *env) {
        if (!strcmp(env, "0") || !strcmp(env, "scalar")) cap = 0;
        else if (!strcmp(env, "1") || !strcmp(env, "avx2")) cap = 1;
    }
    nas_level = have_level < cap ? have_level : cap;
    use_simd = have_simd && cap >= 2;
    slow_gathers = have_level >= 1 ? nas_gathers_slow() : 1;
    tans_avx2 = nas_level >= 1 && (!slow_gathers || (env && *env && cap >= 1));
}

INLINE int64_t val_dec_core(const ValDec *d, int64_t *Bp, uint32_t *Xs, const int N, int64_t pos, int64_t stop,
                            void *out_, const int OSZ) {
    const uint8_t *p = d->p;
    const int64_t nbytes = d->nbytes;
    const unsigned m = d->m, top = d->top;
    const uint64_t mmask = lowmask(m);
    int64_t B = *Bp;
    uint32_t X[MAXN];
    for (int k = 0; k < N; k++) X[k] = Xs[k];
    int64_t r = 0;
    while (d->run_end[r] <= pos) r++;
    int64_t status = -1;
    char *outp = (char *)out_;
    while (pos < stop) {
        int64_t end = d->run_end[r] < stop ? d->run_end[r] : stop;
        int64_t t = d->run_tab[r];
        const uint64_t *tab_t = d->tab + t * d->L;
        const unsigned z = (unsigned)d->z[t], wt = d->w - z;
        const int64_t *esc_t = d->esc + t * d->esc_w;
        const int64_t n_esc_t = d->n_esc[t];
        if (OSZ != 1 && d->A) {
            JoinK jk;
            jk.z = z; jk.m = m; jk.top = top; jk.mmask = mmask; jk.wzmask = lowmask(wt);
            jk.M = (((uint64_t)1 << top) | mmask) & ~lowmask(z);
            jk.wt = wt; jk.esc_pad = d->esc_pad + t * d->pad_w; jk.pad_mask = (uint64_t)d->pad_w - 1;
            int64_t done = (d->L == 256 ? FAST256 : FAST)[N][(OSZ == 4) + 2 * use_pdep](
                p, nbytes, &B, X, d->A + 2 * t * d->L, d->L, end - pos, outp, &jk);
            if (done < 0) goto badesc;
            pos += done;
            outp += OSZ * done;
        }
        if (OSZ == 2) {
            typedef uint16_t OT;
            while (pos + N <= end) {
#pragma GCC unroll 16
                for (int k = 0; k < N; k++) VAL_STEP(X[k], k);
                pos += N;
                outp += 2 * N;
            }
            while (pos < end) {
                VAL_STEP(X[0], 0);
                uint32_t x0 = X[0];
                for (int k = 0; k + 1 < N; k++) X[k] = X[k + 1];
                X[N - 1] = x0;
                pos++;
                outp += 2;
            }
        } else if (OSZ == 4) {
            typedef uint32_t OT;
            while (pos + N <= end) {
#pragma GCC unroll 16
                for (int k = 0; k < N; k++) VAL_STEP(X[k], k);
                pos += N;
                outp += 4 * N;
            }
            while (pos < end) {
                VAL_STEP(X[0], 0);
                uint32_t x0 = X[0];
                for (int k = 0; k + 1 < N; k++) X[k] = X[k + 1];
                X[N - 1] = x0;
                pos++;
                outp += 4;
            }
        } else {
            typedef uint8_t OT;
            while (pos < end) {
                VAL_STEP(X[0], 0);
                uint32_t x0 = X[0];
                for (int k = 0; k + 1 < N; k++) X[k] = X[k + 1];
                X[N - 1] = x0;
                pos++;
                outp += 1;
            }
        }
        r++;
    }
    goto done;
ranout:
    status = pos;
    goto done;
badesc:
    status = -2;
done:
    for (int k = 0; k < N; k++) Xs[k] = X[k];
    *Bp = B;
    return status;
}

#define VAL_INST(NN)                                                                                  \
    static int64_t val_dec_n##NN##_1(const ValDec *d, int64_t *Bp, uint32_t *Xs, int64_t pos, int64_t stop, \
                                     void *o) { return val_dec_core(d, Bp, Xs, NN, pos, stop, o, 1); }  \
    static int64_t val_dec_n##NN##_2(const ValDec *d, int64_t *Bp, uint32_t *Xs, int64_t pos, int64_t stop, \
                                     void *o) { return val_dec_core(d, Bp, Xs, NN, pos, stop, o, 2); }  \
    static int64_t val_dec_n##NN##_4(const ValDec *d, int64_t *Bp, uint32_t *Xs, int64_t pos, int64_t stop, \
                                     void *o) { return val_dec_core(d, Bp, Xs, NN, pos, stop, o, 4); }

VAL_INST(1) VAL_INST(2) VAL_INST(3) VAL_INST(4) VAL_INST(5) VAL_INST(6) VAL_INST(7) VAL_INST(8)
VAL_INST(9) VAL_INST(10) VAL_INST(11) VAL_INST(12) VAL_INST(13) VAL_INST(14) VAL_INST(15) VAL_INST(16)

typedef int64_t (*val_dec_fn)(const ValDec *, int64_t *, uint32_t *, int64_t, int64_t, void *);
#define VFN(NN) {val_dec_n##NN##_1, val_dec_n##NN##_2, val_dec_n##NN##_4}
static const val_dec_fn VAL_DEC[MAXN + 1][3] = {{0, 0, 0}, VFN(1), VFN(2), VFN(3), VFN(4), VFN(5), VFN(6), VFN(7),
                                                VFN(8), VFN(9), VFN(10), VFN(11), VFN(12), VFN(13), VFN(14),
                                                VFN(15), VFN(16)};

HIDDEN int64_t nas_val_dec16(int N, const ValDec *d, int64_t *Bp, uint32_t *Xs, int64_t pos, int64_t stop, void *out) {
    return VAL_DEC[N][1](d, Bp, Xs, pos, stop, out);
}

/* ---------------------------------------------------------------------------------------------- */
/* The AVX-512 values decoder: N = 16 states, 16-bit values (bf16, fp16).
 *
 * One block is 16 pairs, one per state, every lane of a zmm register at once: a gather reads the 16
 * states' entries, a prefix sum of their field widths gives each lane's bit position (lane k's field
 * lies just below lane k - 1's), a byte permute (vpermb) pulls each lane's 4 bytes out of one 64-byte
 * load of the bit string, and shifts cut the next state's low bits and the additional data out. A
 * block is one dependency chain (the next block's gather needs this block's states, and every lane's
 * position needs every earlier lane's width), about 50 cycles long, so one stream alone would be
 * latency bound: the kernel runs K segments of the stream (the parts between checkpoints, which
 * start from their own states and bit positions, docs/bitstream.md §8) side by side, each its own
 * chain, and the core overlaps them. The scalar kernel (val_dec_core) does what the blocks cannot:
 * the top of the stream (the 64-byte load would pass the end of the words), its bottom (a block
 * could run out), and the pairs of a run that do not fill a block. Same values, states and bit
 * positions as the scalar kernel (tests/test_native.py forces both).
 *
 * Entry per (table, state), 32 bits: need (the field width, <= 25) in bits 0..4, 32 - nb in 5..10, the
 * direct symbol's exponent field in 11..18 (one shift puts it in place: m <= 11), bit 19 the escape
 * flag, base in 20..31 (L <= 4096): each field is one or two instructions away. */


#ifdef HAVE_PDEP
#define HAVE_SIMD 1
#define SIMD_ATTR __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi,avx512dq,bmi2")))



/* Inclusive prefix sum of 16 lanes: within each 128-bit lane, then the lanes' carries. */
SIMD_ATTR static inline __m512i sv_prefix16(__m512i need) {
    __m512i s = _mm512_add_epi32(need, _mm512_bslli_epi128(need, 4));
    s = _mm512_add_epi32(s, _mm512_bslli_epi128(s, 8));
    __m512i tl = _mm512_shuffle_epi32(s, _MM_PERM_DDDD);
    __m512i c1 = _mm512_maskz_shuffle_i32x4(0xfff0, tl, tl, 0x90); /* [0, t0, t1, t2] */
    __m512i c2 = _mm512_maskz_shuffle_i32x4(0xff00, tl, tl, 0x40); /* [0, 0, t0, t1] */
    __m512i c3 = _mm512_maskz_shuffle_i32x4(0xf000, tl, tl, 0x00); /* [0, 0, 0, t0] */
    return _mm512_add_epi32(_mm512_add_epi32(s, c1), _mm512_add_epi32(c2, c3));
}

/* A chain of the 16-lane kernels before its next block: the run it is in (entered when it changes, with
 * the run's shift z, data width w - z and its mask) and its edges, which the scalar kernel of 2^oi-byte
 * values decodes: the rest of a run too short for a block, the top of the stream (the window would pass
 * the words' end) and its bottom (B < safe_lo). 1 when a vector block can run next; 0 when the scalar
 * kernel ran instead or the chain is done. */
static int schain_longer_first(const void *a, const void *b) {
    const SChain *x = *(SChain *const *)a, *y = *(SChain *const *)b;
    int64_t lx = x->stop - x->pos, ly = y->stop - y->pos;
    return lx > ly ? -1 : lx < ly ? 1 : (x < y ? -1 : x > y);
}

SIMD_ATTR static inline int sv16_ready(const ValDec *d, const SimdTab *st, SChain *h, SRun *u, __m512i *xv,
                                       __m128i *cz, __m512i *cwt, __m512i *wzmask, int64_t safe_lo, int oi,
                                       void *out) {
    const int64_t safe_hi = (d->nbytes - 8) * 8;
    if (u->fend < 0 || h->pos >= u->fend) {
        if (!srun_enter(d, st, h, u)) return 0;
        unsigned z = u->z, wt = d->w - z;
        *cz = _mm_cvtsi32_si128((int)z);
        *cwt = _mm512_set1_epi32((int)wt);
        *wzmask = _mm512_set1_epi32((int)lowmask(wt));
    }
    int64_t B = h->B, pos = h->pos;
    if (LIKELY(pos + 16 <= u->fend && B <= safe_hi && B >= safe_lo)) return 1;
    int64_t upto = pos + 16 > u->fend ? u->fend : B > safe_hi ? pos + 16 : h->stop;
    _mm512_storeu_si512((void *)h->X, *xv);
    int64_t s = VAL_DEC[16][oi](d, &h->B, h->X, pos, upto, (void *)((char *)out + (pos << oi)));
    *xv = _mm512_loadu_si512((const void *)h->X);
    if (s != -1) { h->status = s; h->done = 1; return 0; }
    h->pos = upto;
    return 0;
}

SIMD_ATTR static void simd_val16(const ValDec *d, const SimdTab *st, SChain **q, int64_t S, uint16_t *out) {
    enum { KMAX = SV_KMAX };
    const uint8_t *p = d->p;
    const __m512i m31 = _mm512_set1_epi32(31), m32 = _mm512_set1_epi32(32);
    const __m512i m63 = _mm512_set1_epi32(63), expmask = _mm512_set1_epi32((int)(0xffu << d->m));
    const __m512i escbit = _mm512_set1_epi32(1 << 19);
    const __m128i cexp = _mm_cvtsi32_si128(11 - (int)d->m);
    const __m512i bcast = _mm512_set4_epi32(0x0c0c0c0c, 0x08080808, 0x04040404, 0x00000000);
    const __m512i bytes4 = _mm512_set1_epi32(0x03020100), seven = _mm512_set1_epi32(7);
    const __m128i cm = _mm_cvtsi32_si128((int)d->m), ctop = _mm_cvtsi32_si128((int)d->top);
    const __m512i mmask = _mm512_set1_epi32((int)lowmask(d->m));
    __m512i xv[KMAX];
    /* per chain: the current run's fast-zone end and table */
    SRun u[KMAX];
    __m128i cz[KMAX];
    __m512i wzmask[KMAX], cwt[KMAX];
#define SLOT_IN(c) { xv[c] = _mm512_loadu_si512((const void *)at[c]->X); u[c].r = 0; u[c].fend = -1; }
#define SLOT_OUT(c) _mm512_storeu_si512((void *)at[c]->X, xv[c])
    SLOTS_OPEN(KMAX, SLOT_IN)
    for (;;) {
        int active = 0;
        for (int c = 0; c < K; c++) {
            SLOT_VISIT(c, h, SLOT_IN, SLOT_OUT)
            if (!sv16_ready(d, st, h, &u[c], &xv[c], &cz[c], &cwt[c], &wzmask[c], SV_SAFE_LO, 1, out)) continue;
            int64_t B = h->B, pos = h->pos;
            __m512i ent = _mm512_i32gather_epi32(xv[c], (const void *)u[c].tab, 4);
            __m512i need = _mm512_and_si512(ent, m31);
            __m512i snb = _mm512_and_si512(_mm512_srli_epi32(ent, 5), m63); /* 32 - nb */
            __m512i base = _mm512_srli_epi32(ent, 20);
            __m512i pre = sv_prefix16(need);
            /* lane k's field is bits [B - pre_k, B - pre_k + need_k); the window holds bytes B/8 - 60 ..
             * B/8 + 3, so the field starts rel = B % 8 + 480 - pre_k bits into it */
            /* the words a few blocks on (downwards, K chains at once: more descending streams than the
             * hardware prefetcher follows; a prefetch never faults, so the address may pass the start) */
            _mm_prefetch((const char *)((uintptr_t)(p + (B >> 3)) - 1024), _MM_HINT_T0);
            __m512i win = _mm512_loadu_si512((const void *)(p + (B >> 3) - 60));
            __m512i rel = _mm512_sub_epi32(_mm512_set1_epi32((int)(B & 7) + 480), pre);
            __m512i idx = _mm512_add_epi8(_mm512_shuffle_epi8(_mm512_srli_epi32(rel, 3), bcast), bytes4);
            __m512i f = _mm512_srlv_epi32(_mm512_permutexvar_epi8(idx, win), _mm512_and_si512(rel, seven));
            xv[c] = _mm512_add_epi32(base, _mm512_srlv_epi32(_mm512_sllv_epi32(f, snb), snb));
            /* the additional data: the w - z bits above the nb state bits (a direct symbol's field ends there) */
            __m512i nb = _mm512_sub_epi32(m32, snb);
            __m512i fd = _mm512_srlv_epi32(f, nb);
            __m512i e = _mm512_and_si512(fd, wzmask[c]);
            __m512i hi = _mm512_and_si512(_mm512_srl_epi32(ent, cexp), expmask);
            __mmask16 em = _mm512_test_epi32_mask(ent, escbit);
            if (UNLIKELY(em)) {
                /* escape symbols: the exponent comes from the escape index, the need - nb - (w - z) bits above
                 * the data */
                __m512i sib = _mm512_sub_epi32(m32, _mm512_sub_epi32(_mm512_sub_epi32(need, nb), cwt[c]));
                __m512i ix = _mm512_srlv_epi32(_mm512_sllv_epi32(_mm512_srlv_epi32(fd, cwt[c]), sib), sib);
                if (_mm512_mask_cmpge_epu32_mask(em, ix, _mm512_set1_epi32((int)u[c].n_esc))) {
                    h->status = -2; h->done = 1; continue;
                }
                hi = _mm512_mask_i32gather_epi32(hi, em, ix, (const void *)u[c].esc, 4);
            }
            __m512i x = _mm512_sll_epi32(e, cz[c]);
            __m512i sg = _mm512_sll_epi32(_mm512_srl_epi32(x, cm), ctop);
            __m512i v = _mm512_ternarylogic_epi32(sg, hi, _mm512_and_si512(x, mmask), 0xfe);
            _mm256_storeu_si256((__m256i *)(out + pos), _mm512_cvtepi32_epi16(v));
            h->B = B - (int64_t)_mm_extract_epi32(_mm512_extracti32x4_epi32(pre, 3), 3);
            h->pos = pos + 16;
        }
        if (!active) break;
    }
#undef SLOT_IN
#undef SLOT_OUT
}

/* The same for N = 8 in ymm registers (8 lanes, a 32-byte window): a block is 8 pairs. */
SIMD_ATTR static void simd_val8(const ValDec *d, const SimdTab *st, SChain **q, int64_t S, uint16_t *out) {
    enum { KMAX = SV_KMAX };
    const uint8_t *p = d->p;
    const int64_t safe_hi = (d->nbytes - 8) * 8;
    const __m256i m31 = _mm256_set1_epi32(31), m32 = _mm256_set1_epi32(32);
    const __m256i m63 = _mm256_set1_epi32(63), m64 = _mm256_set1_epi32(64), expmask = _mm256_set1_epi32((int)(0xffu << d->m));
    const __m256i escbit = _mm256_set1_epi32(1 << 19);
    const __m128i cexp = _mm_cvtsi32_si128(11 - (int)d->m);
    const __m256i bcast = _mm256_setr_epi32(0, 0x04040404, 0x08080808, 0x0c0c0c0c, 0, 0x04040404, 0x08080808, 0x0c0c0c0c);
    const __m256i bytes4 = _mm256_set1_epi32(0x03020100), seven = _mm256_set1_epi32(7);
    const __m128i cm = _mm_cvtsi32_si128((int)d->m), ctop = _mm_cvtsi32_si128((int)d->top);
    const __m256i mmask = _mm256_set1_epi32((int)lowmask(d->m));
    __m256i xv[KMAX];
    /* per chain: the current run's fast-zone end and table */
    SRun u[KMAX];
    __m128i cz[KMAX];
    __m256i wzmask[KMAX], cwt[KMAX];
#define SLOT_IN(c) { xv[c] = _mm256_loadu_si256((const __m256i *)at[c]->X); u[c].r = 0; u[c].fend = -1; }
#define SLOT_OUT(c) _mm256_storeu_si256((__m256i *)at[c]->X, xv[c])
    SLOTS_OPEN(KMAX, SLOT_IN)
    for (;;) {
        int active = 0;
        for (int c = 0; c < K; c++) {
            SLOT_VISIT(c, h, SLOT_IN, SLOT_OUT)
            if (u[c].fend < 0 || h->pos >= u[c].fend) {
                if (!srun_enter(d, st, h, &u[c])) continue;
                unsigned z = u[c].z, wt = d->w - z;
                cz[c] = _mm_cvtsi32_si128((int)z);
                cwt[c] = _mm256_set1_epi32((int)wt);
                wzmask[c] = _mm256_set1_epi32((int)lowmask(wt));
            }
            int64_t B = h->B, pos = h->pos;
            if (UNLIKELY(pos + 8 > u[c].fend || B > safe_hi || B < SV_SAFE_LO)) {
                /* the scalar kernel: the rest of the run, the top of the stream, or its bottom */
                int64_t upto = pos + 8 > u[c].fend ? u[c].fend : B > safe_hi ? pos + 8 : h->stop;
                _mm256_storeu_si256((__m256i *)h->X, xv[c]);
                int64_t s = VAL_DEC[8][1](d, &h->B, h->X, pos, upto, (void *)(out + pos));
                xv[c] = _mm256_loadu_si256((const __m256i *)h->X);
                if (s != -1) { h->status = s; h->done = 1; continue; }
                h->pos = upto;
                continue;
            }
            __m256i ent = _mm256_i32gather_epi32((const int *)u[c].tab, xv[c], 4);
            __m256i need = _mm256_and_si256(ent, m31);
            __m256i snb = _mm256_and_si256(_mm256_srli_epi32(ent, 5), m63); /* 32 - nb */
            __m256i base = _mm256_srli_epi32(ent, 20);
            /* inclusive prefix sum of need: within each 128-bit lane, then the lanes' carries */
            __m256i s = _mm256_add_epi32(need, _mm256_bslli_epi128(need, 4));
            s = _mm256_add_epi32(s, _mm256_bslli_epi128(s, 8));
            __m256i tl = _mm256_shuffle_epi32(s, 0xff);
            __m256i pre = _mm256_add_epi32(s, _mm256_permute2x128_si256(tl, tl, 0x08)); /* + [0, t0] */
            /* the window holds bytes B/8 - 28 .. B/8 + 3: rel = B % 8 + 224 - pre_k */
            __m256i win = _mm256_loadu_si256((const __m256i *)(p + (B >> 3) - 28));
            __m256i rel = _mm256_sub_epi32(_mm256_set1_epi32((int)(B & 7) + 224), pre);
            __m256i idx = _mm256_add_epi8(_mm256_shuffle_epi8(_mm256_srli_epi32(rel, 3), bcast), bytes4);
            __m256i f = _mm256_srlv_epi32(_mm256_permutexvar_epi8(idx, win), _mm256_and_si256(rel, seven));
            __m256i sneed = _mm256_sub_epi32(m32, need);
            xv[c] = _mm256_add_epi32(base, _mm256_srlv_epi32(_mm256_sllv_epi32(f, snb), snb));
            __m256i e = _mm256_srlv_epi32(_mm256_sllv_epi32(f, sneed), _mm256_sub_epi32(_mm256_sub_epi32(m64, need), snb));
            __m256i hi = _mm256_and_si256(_mm256_srl_epi32(ent, cexp), expmask);
            __mmask8 em = _mm256_test_epi32_mask(ent, escbit);
            if (UNLIKELY(em)) {
                /* escape symbols: the exponent comes from the escape index above the w - z data bits */
                __m256i ix = _mm256_srlv_epi32(e, cwt[c]);
                if (_mm256_mask_cmpge_epu32_mask(em, ix, _mm256_set1_epi32((int)u[c].n_esc))) {
                    h->status = -2; h->done = 1; continue;
                }
                hi = _mm256_mmask_i32gather_epi32(hi, em, ix, (const void *)u[c].esc, 4);
                e = _mm256_mask_and_epi32(e, em, e, wzmask[c]);
            }
            __m256i x = _mm256_sll_epi32(e, cz[c]);
            __m256i sg = _mm256_sll_epi32(_mm256_srl_epi32(x, cm), ctop);
            __m256i v = _mm256_ternarylogic_epi32(sg, hi, _mm256_and_si256(x, mmask), 0xfe);
            _mm_storeu_si128((__m128i *)(out + pos), _mm256_cvtepi32_epi16(v));
            h->B = B - (int64_t)_mm_extract_epi32(_mm256_extracti128_si256(pre, 1), 3);
            h->pos = pos + 8;
        }
        if (!active) break;
    }
#undef SLOT_IN
#undef SLOT_OUT
}

/* The same for 32-bit values (fp32 pairs: w = m + 1 = 24 bits of additional data, m >= 12), N = 16.
 *
 * A field is up to nb + w - z bits (+ the escape index): more than one 32-bit lane holds after its
 * bit offset, and 16 of them more than one 64-byte load. So the window is two loads (128 bytes,
 * looked up with the two-register byte permute vpermt2b), and each lane's field is read in parts of at
 * most 25 bits: the next state's nb bits at the field's start, the w - z data bits after them and, for
 * an escape symbol, its index after those.
 *
 * Entry per (table, state), 32 bits: need (<= 56) in bits 0..5, nb in 6..10, bit 11 the escape flag,
 * the direct symbol's exponent in 12..19, base in 20..31 (L <= 4096). */
#define SW_ESC (1 << 11)
#define SW_SAFE_LO 1024 /* B >= this: the window's first byte (B / 8 - 124) is a byte of the words */

/* 25 bits of the 128-byte window (wlo, whi) from bit pos of each lane (pos <= 999) */
SIMD_ATTR static inline __m512i sw_bits(__m512i wlo, __m512i whi, __m512i pos, __m512i bcast, __m512i bytes4,
                                        __m512i seven) {
    __m512i idx = _mm512_add_epi8(_mm512_shuffle_epi8(_mm512_srli_epi32(pos, 3), bcast), bytes4);
    return _mm512_srlv_epi32(_mm512_permutex2var_epi8(wlo, idx, whi), _mm512_and_si512(pos, seven));
}

SIMD_ATTR static void simd_val16_w32(const ValDec *d, const SimdTab *st, SChain **q, int64_t S, uint32_t *out) {
    enum { KMAX = SV_KMAX };
    const uint8_t *p = d->p;
    const __m512i m63 = _mm512_set1_epi32(63), m31 = _mm512_set1_epi32(31), m32 = _mm512_set1_epi32(32);
    const __m512i expmask = _mm512_set1_epi32(0xff << 12), escbit = _mm512_set1_epi32(SW_ESC);
    const __m128i cexp = _mm_cvtsi32_si128((int)d->m - 12);
    const __m512i bcast = _mm512_set4_epi32(0x0c0c0c0c, 0x08080808, 0x04040404, 0x00000000);
    const __m512i bytes4 = _mm512_set1_epi32(0x03020100), seven = _mm512_set1_epi32(7);
    const __m128i cm = _mm_cvtsi32_si128((int)d->m), ctop = _mm_cvtsi32_si128((int)d->top);
    const __m512i mmask = _mm512_set1_epi32((int)lowmask(d->m));
    __m512i xv[KMAX];
    SRun u[KMAX];
    __m128i cz[KMAX];
    __m512i wzmask[KMAX], cwt[KMAX];
#define SLOT_IN(c) { xv[c] = _mm512_loadu_si512((const void *)at[c]->X); u[c].r = 0; u[c].fend = -1; }
#define SLOT_OUT(c) _mm512_storeu_si512((void *)at[c]->X, xv[c])
    SLOTS_OPEN(KMAX, SLOT_IN)
    for (;;) {
        int active = 0;
        for (int c = 0; c < K; c++) {
            SLOT_VISIT(c, h, SLOT_IN, SLOT_OUT)
            if (!sv16_ready(d, st, h, &u[c], &xv[c], &cz[c], &cwt[c], &wzmask[c], SW_SAFE_LO, 2, out)) continue;
            int64_t B = h->B, pos = h->pos;
            __m512i ent = _mm512_i32gather_epi32(xv[c], (const void *)u[c].tab, 4);
            __m512i need = _mm512_and_si512(ent, m63);
            __m512i nb = _mm512_and_si512(_mm512_srli_epi32(ent, 6), m31);
            __m512i base = _mm512_srli_epi32(ent, 20);
            __m512i pre = sv_prefix16(need);
            /* the window holds bytes B/8 - 124 .. B/8 + 3: lane k's field starts rel = B % 8 + 992 - pre_k bits in */
            const uint8_t *wp = p + (B >> 3) - 124;
            _mm_prefetch((const char *)((uintptr_t)wp - 2048), _MM_HINT_T0); /* as in simd_val16 */
            __m512i wlo = _mm512_loadu_si512((const void *)wp), whi = _mm512_loadu_si512((const void *)(wp + 64));
            __m512i rel = _mm512_sub_epi32(_mm512_set1_epi32((int)(B & 7) + 992), pre);
            __m512i f = sw_bits(wlo, whi, rel, bcast, bytes4, seven);
            __m512i snb = _mm512_sub_epi32(m32, nb);
            xv[c] = _mm512_add_epi32(base, _mm512_srlv_epi32(_mm512_sllv_epi32(f, snb), snb));
            __m512i dpos = _mm512_add_epi32(rel, nb);
            __m512i e = _mm512_and_si512(sw_bits(wlo, whi, dpos, bcast, bytes4, seven), wzmask[c]);
            __m512i hi = _mm512_sll_epi32(_mm512_and_si512(ent, expmask), cexp);
            __mmask16 em = _mm512_test_epi32_mask(ent, escbit);
            if (UNLIKELY(em)) {
                /* escape symbols: the exponent comes from the escape index above the w - z data bits */
                __m512i ib = _mm512_sub_epi32(_mm512_sub_epi32(need, nb), cwt[c]);
                __m512i sib = _mm512_sub_epi32(m32, ib);
                __m512i ix = sw_bits(wlo, whi, _mm512_add_epi32(dpos, cwt[c]), bcast, bytes4, seven);
                ix = _mm512_srlv_epi32(_mm512_sllv_epi32(ix, sib), sib);
                if (_mm512_mask_cmpge_epu32_mask(em, ix, _mm512_set1_epi32((int)u[c].n_esc))) {
                    h->status = -2; h->done = 1; continue;
                }
                hi = _mm512_mask_i32gather_epi32(hi, em, ix, (const void *)u[c].esc, 4);
            }
            __m512i x = _mm512_sll_epi32(e, cz[c]);
            __m512i sg = _mm512_sll_epi32(_mm512_srl_epi32(x, cm), ctop);
            __m512i v = _mm512_ternarylogic_epi32(sg, hi, _mm512_and_si512(x, mmask), 0xfe);
            _mm512_storeu_si512((void *)(out + pos), v);
            h->B = B - (int64_t)_mm_extract_epi32(_mm512_extracti32x4_epi32(pre, 3), 3);
            h->pos = pos + 16;
        }
        if (!active) break;
    }
#undef SLOT_IN
#undef SLOT_OUT
}

#endif


/* tans_decode_values(words, Bs, states, vtab, L, run_tab, run_end, poss, stops, z, esc, n_esc, w, m, top, out,
 *                    statuses) -> None: segments s = 0 .. S-1 (Bs, poss, stops, statuses: int64[S]; states:
 * int64[S * N], segment s's lane k at s * N + k), each pairs poss[s] .. stops[s]-1 from bit position Bs[s]
 * as values into out[poss[s] .. stops[s]-1] (item size 1, 2 or 4; segments must not overlap). Per
 * segment: statuses -1 success (Bs and states then those after its last pair), >= 0 the pair where
 * the words ran out, -2 an escape index outside its group. Several segments of one N = 16 stream of
 * 16-bit values run side by side in an AVX-512 kernel where the CPU has one (simd_val16 with VBMI, else
 * nas_avx512_val16 for L <= 256), else in the AVX2 one where gathers are fast (nas_avx2_val16); of 32-bit
 * values (fp32 pairs) in simd_val16_w32 where the CPU has VBMI. */
static PyObject *py_tans_decode_values(PyObject *self, PyObject *args) {
    PyObject *ow, *oB, *ost, *otab, *ort, *ore, *opos, *ostop, *oz, *oesc, *onesc, *oout, *ostat;
    long long L, w_, m_, top_;
    if (!PyArg_ParseTuple(args, "OOOOLOOOOOOOLLLOO", &ow, &oB, &ost, &otab, &L, &ort, &ore, &opos, &ostop, &oz, &oesc,
                          &onesc, &w_, &m_, &top_, &oout, &ostat))
        return NULL;
    Buf w = {0}, bb = {0}, st = {0}, tab = {0}, rt = {0}, re = {0}, ps = {0}, sp = {0}, z = {0}, esc = {0},
        nesc = {0}, out = {0}, sts = {0};
    PyObject *res = NULL;
    uint64_t *A = NULL;
    uint32_t *simd_tab = NULL;
    if (get_buf(ow, &w, 0, 0, "words") || get_buf(oB, &bb, 1, 8, "Bs") || get_buf(ost, &st, 1, 8, "states") ||
        get_buf(otab, &tab, 0, 8, "table") || get_buf(ort, &rt, 0, 8, "run_tab") ||
        get_buf(ore, &re, 0, 8, "run_end") || get_buf(opos, &ps, 0, 8, "poss") || get_buf(ostop, &sp, 0, 8, "stops") ||
        get_buf(oz, &z, 0, 8, "z") || get_buf(oesc, &esc, 0, 8, "esc") || get_buf(onesc, &nesc, 0, 8, "n_esc") ||
        get_buf(oout, &out, 1, 0, "out") || get_buf(ostat, &sts, 1, 8, "statuses"))
        goto out;
    {
        int64_t S = NITEMS(bb), N = S ? NITEMS(st) / S : 0, ntab = L > 0 ? NITEMS(tab) / L : 0, n_runs;
        int64_t osz = out.view.itemsize, oi = osz == 1 ? 0 : osz == 2 ? 1 : osz == 4 ? 2 : -1;
        int64_t esc_w = ntab ? NITEMS(esc) / ntab : 0;
        int64_t *Bs = (int64_t *)bb.view.buf, *statuses = (int64_t *)sts.view.buf;
        const int64_t *poss = (const int64_t *)ps.view.buf, *stops = (const int64_t *)sp.view.buf;
        if (S < 1 || N < 1 || N > MAXN || NITEMS(st) != S * N || NITEMS(ps) != S || NITEMS(sp) != S ||
            NITEMS(sts) != S || oi < 0 || L < 1 || L > (1 << 16) || ntab < 1 || NITEMS(z) != ntab ||
            NITEMS(nesc) != ntab || esc_w * ntab != NITEMS(esc) || w_ < 0 || w_ > 56 || m_ < 0 || m_ > w_ ||
            top_ < 0 || top_ > 8 * osz - 1) {
            PyErr_SetString(PyExc_ValueError, "tans_decode_values: inconsistent arguments");
            goto out;
        }
        for (int64_t s = 0; s < S; s++)
            if (poss[s] < 0 || poss[s] > stops[s] || stops[s] > NITEMS(out) || Bs[s] < 0 ||
                Bs[s] > (int64_t)w.view.len * 8) {
                PyErr_SetString(PyExc_ValueError, "tans_decode_values: inconsistent arguments");
                goto out;
            }
        if (check_runs_arrays(&rt, &re, ntab, &n_runs)) goto out;
        const int64_t *zz = (const int64_t *)z.view.buf, *ne = (const int64_t *)nesc.view.buf;
        for (int64_t t = 0; t < ntab; t++)
            if (zz[t] < 0 || zz[t] > w_ || ne[t] < 0 || ne[t] > esc_w) {
                PyErr_SetString(PyExc_ValueError, "tans_decode_values: bad shift or escape group");
                goto out;
            }
        /* the fast path's tables: per table a block of 2L words, A[x] = &A[base[x]] and A[L + x] = need | nb << 8 |
         * hi << 32 (the state is a pointer to its entry, the next one is one address computation away, and for
         * L = 256 the fields are at a constant offset); then the
         * escape groups padded to a power of two covering every index a field can hold */
        int64_t D = ntab * L, pad_w = 1;
        while (pad_w < esc_w) pad_w <<= 1;
        int simd_ok = (N == 16 || N == 8) && osz == 2 && L <= 4096 && top_ - m_ <= 8 && m_ <= 11;
        /* simd_val16_w32: each part of a field (state bits, w - z data bits, escape index) at most 25 bits */
        int simd32_ok = N == 16 && osz == 4 && L <= 4096 && top_ - m_ <= 8 && m_ >= 12 && w_ == m_ + 1;
        {
            const uint64_t *vt0 = (const uint64_t *)tab.view.buf;
            for (int64_t i = 0; i < ntab * L; i++) {
                uint64_t e = vt0[i];
                int64_t t = i / L;
                int64_t ib = (int64_t)V_NEED(e) - (int64_t)V_NB(e) - ((int64_t)w_ - zz[t]);
                if (V_HI(e) == ESC && ib > 0) {
                    if (ib > 20) { PyErr_SetString(PyExc_ValueError, "tans_decode_values: escape field too wide"); goto out; }
                    while (pad_w < ((int64_t)1 << ib)) pad_w <<= 1;
                }
                if (V_NEED(e) > SV_MAXNEED) simd_ok = 0;
                if (V_NB(e) > 16 || V_NEED(e) > 56 || w_ - zz[t] > 25 || (V_HI(e) == ESC ? ib < 0 || ib > 25 : ib != 0))
                    simd32_ok = 0;
            }
        }
        A = (uint64_t *)malloc((size_t)(2 * D + ntab * pad_w) * sizeof(uint64_t));
        if (!A) { PyErr_NoMemory(); goto out; }
        uint64_t *esc_pad = A + 2 * D;
        for (int64_t t = 0; t < ntab; t++)
            for (int64_t i = 0; i < pad_w; i++)
                esc_pad[t * pad_w + i] = i < ne[t] ? (uint64_t)((const int64_t *)esc.view.buf)[t * esc_w + i] << m_
                                                   : (uint64_t)1 << 63;
        const uint64_t *vt = (const uint64_t *)tab.view.buf;
        for (int64_t t = 0; t < ntab; t++)
            for (int64_t x = 0; x < L; x++) {
                uint64_t e = vt[t * L + x];
                unsigned base = V_BASE(e), nb = V_NB(e), need = V_NEED(e);
                if (nb > 16 || need > 56 || need < nb || base + ((int64_t)1 << nb) > L) {
                    PyErr_SetString(PyExc_ValueError, "tans_decode_values: table entry outside the table");
                    goto out;
                }
                A[2 * t * L + x] = (uint64_t)(uintptr_t)(A + 2 * t * L + base);
                A[2 * t * L + L + x] = need | (uint64_t)nb << 8 | (uint64_t)V_HI(e) << 32;
            }
        ValDec d = {(const uint8_t *)w.view.buf, (int64_t)w.view.len, (const uint64_t *)tab.view.buf, L, ntab,
                    (const int64_t *)rt.view.buf, (const int64_t *)re.view.buf, zz, (const int64_t *)esc.view.buf, ne,
                    esc_w, (unsigned)w_, (unsigned)m_, (unsigned)top_, A, D, esc_pad, pad_w};
        SChain *ch = (SChain *)calloc((size_t)S, sizeof(SChain));
        SChain **q = (SChain **)calloc((size_t)S, sizeof(SChain *));
        if (!ch || !q) { free(ch); free(q); PyErr_NoMemory(); goto out; }
        const int64_t *s64 = (const int64_t *)st.view.buf;
        for (int64_t s = 0; s < S; s++) {
            ch[s].B = Bs[s]; ch[s].pos = poss[s]; ch[s].stop = stops[s]; ch[s].status = -1;
            for (int64_t k = 0; k < N; k++) {
                int64_t v = s64[s * N + (poss[s] + k) % N];
                if (v < 0 || v >= L) {
                    free(ch); free(q);
                    PyErr_SetString(PyExc_ValueError, "tans_decode_values: state outside the table");
                    goto out;
                }
                ch[s].X[k] = (uint32_t)v;
            }
        }
#ifdef HAVE_SIMD
        SimdTab sv = {NULL, NULL, L, esc_w};
        /* without VBMI (or where the AVX-512 level is asked for on such a CPU): the permute kernel, L <= 256 */
        int use_perm = simd_ok && !use_simd && N == 16 && nas_level >= 2 && L <= 256 && m_ >= 5 && top_ <= 16 &&
                       w_ <= top_;
        /* its entries hold the exponent fields in place: every one must lie in bits m .. top - 1 */
        for (int64_t i = 0; use_perm && i < ntab * L; i++)
            if (V_HI(vt[i]) != ESC && (V_HI(vt[i]) & ~(uint32_t)(lowmask((unsigned)top_) & ~lowmask((unsigned)m_))))
                use_perm = 0;
        for (int64_t i = 0; use_perm && i < ntab * esc_w; i++) {
            int64_t ex = ((const int64_t *)esc.view.buf)[i];
            if (ex < 0 || ex >= ((int64_t)1 << (top_ - m_))) use_perm = 0;
        }
        int use_avx2 = simd_ok && !use_simd && N == 16 && tans_avx2 && !use_perm;
        int use_w32 = simd32_ok && use_simd;
        if (use_w32) {
            simd_tab = (uint32_t *)calloc((size_t)(ntab * L + ntab * esc_w + 32), sizeof(uint32_t));
            if (!simd_tab) { free(ch); free(q); PyErr_NoMemory(); goto out; }
            for (int64_t t = 0; t < ntab; t++)
                for (int64_t x = 0; x < L; x++) {
                    uint64_t e = vt[t * L + x];
                    uint32_t hi = V_HI(e);
                    simd_tab[t * L + x] = V_NEED(e) | V_NB(e) << 6 | V_BASE(e) << 20 |
                                          (hi == ESC ? (uint32_t)SW_ESC : ((hi >> m_) & 0xffu) << 12);
                }
            uint32_t *esc32 = simd_tab + ntab * L;
            for (int64_t t = 0; t < ntab; t++)
                for (int64_t i = 0; i < esc_w; i++)
                    esc32[t * esc_w + i] = (uint32_t)(((const int64_t *)esc.view.buf)[t * esc_w + i] << m_);
            sv.tab32 = simd_tab;
            sv.esc32 = esc32;
        }
        else if (simd_ok && (use_simd || use_avx2 || use_perm)) {
            /* the AVX-512 kernel's entries (see simd_val16), then the escape exponents as 32-bit fields; the
             * permute kernel's tables padded to 256 entries and its groups to at least 32 (zeros: the padding
             * is never read for a valid state or a checked escape index) */
            if (use_perm) { sv.tstride = 256; sv.estride = esc_w < 32 ? 32 : esc_w; }
            simd_tab = (uint32_t *)calloc((size_t)(ntab * sv.tstride + ntab * sv.estride + 32), sizeof(uint32_t));
            if (!simd_tab) { free(ch); free(q); PyErr_NoMemory(); goto out; }
            for (int64_t t = 0; t < ntab; t++)
                for (int64_t x = 0; x < L; x++) {
                    uint64_t e = vt[t * L + x];
                    uint32_t hi = V_HI(e);
                    simd_tab[t * sv.tstride + x] =
                        use_perm ? V_NEED(e) | (32 - V_NB(e)) << PV_SNB | V_BASE(e) << PV_BASE | (hi == ESC ? PV_ESC : hi)
                                 : V_NEED(e) | (32 - V_NB(e)) << 5 | V_BASE(e) << 20 |
                                       (hi == ESC ? 1u << 19 : ((hi >> m_) & 0xffu) << 11);
                }
            uint32_t *esc32 = simd_tab + ntab * sv.tstride;
            for (int64_t t = 0; t < ntab; t++)
                for (int64_t i = 0; i < esc_w; i++)
                    esc32[t * sv.estride + i] = (uint32_t)(((const int64_t *)esc.view.buf)[t * esc_w + i] << m_);
            sv.tab32 = simd_tab;
            sv.esc32 = esc32;
        }
#endif
        Py_BEGIN_ALLOW_THREADS
#ifdef HAVE_SIMD
        if (sv.tab32) {
            /* up to SV_KMAX segments side by side (measured on the MiniLM tensor's 12 segments, Xeon SPR: 6
             * side by side ~1.3 G values/s, 4 ~1.0, 2 ~0.8), longest first (SLOTS_OPEN) */
            for (int64_t s = 0; s < S; s++) q[s] = &ch[s];
            qsort(q, (size_t)S, sizeof(SChain *), schain_longer_first);
            if (use_w32)
                simd_val16_w32(&d, &sv, q, S, (uint32_t *)out.view.buf);
            else
                (use_perm ? nas_avx512_val16 : use_avx2 ? nas_avx2_val16 : N == 16 ? simd_val16 : simd_val8)(
                    &d, &sv, q, S, (uint16_t *)out.view.buf);
        }
        else
#endif
            for (int64_t s = 0; s < S; s++) {
                char *o = (char *)out.view.buf + osz * poss[s];
                ch[s].status = VAL_DEC[N][oi](&d, &ch[s].B, ch[s].X, poss[s], stops[s], o);
            }
        Py_END_ALLOW_THREADS
        int64_t *sw = (int64_t *)st.view.buf;
        for (int64_t s = 0; s < S; s++) {
            statuses[s] = ch[s].status;
            Bs[s] = ch[s].B;
            if (ch[s].status == -1)
                for (int64_t k = 0; k < N; k++) sw[s * N + (stops[s] + k) % N] = ch[s].X[k];
        }
        free(ch); free(q);
        Py_INCREF(Py_None);
        res = Py_None;
    }
out:
    free(A);
    free(simd_tab);
    rel(&w); rel(&bb); rel(&st); rel(&tab); rel(&rt); rel(&re); rel(&ps); rel(&sp); rel(&z); rel(&esc); rel(&nesc);
    rel(&out); rel(&sts);
    return res;
}

/* simd(flag) -> whether a SIMD kernel runs: flag -1 asks, 0 forces the scalar kernels, 1 the best the CPU
 * has (the default); tests compare the two. */
static PyObject *py_simd(PyObject *self, PyObject *args) {
    int flag;
    if (!PyArg_ParseTuple(args, "i", &flag)) return NULL;
    if (flag >= 0) {
        use_simd = flag && have_simd;
        nas_level = flag ? have_level : 0;
        tans_avx2 = nas_level >= 1 && !slow_gathers;
    }
    return PyBool_FromLong(use_simd || nas_level > 0);
}

/* simd_level(level) -> the level in use after the call: -1 asks; 0 scalar, 1 at most AVX2, 2 at most
 * AVX-512 (each capped at what the CPU has). The AVX-512 tANS values kernels run at level 2 only: the VBMI
 * one where the CPU has VBMI, else the permute one (nas_avx512_val16: F/BW, no gathers, tables of L <= 256,
 * the default wherever the CPU has AVX-512, slow gathers or not); at level 1 the AVX2 one does, so tests
 * and benchmarks can run each path on an AVX-512 machine. A level
 * set here runs the AVX2 tANS kernel even where gathers are slow (`slow_gathers`), which the default,
 * and simd(1), leave to the scalar kernel. */
static PyObject *py_simd_level(PyObject *self, PyObject *args) {
    int level;
    if (!PyArg_ParseTuple(args, "i", &level)) return NULL;
    if (level >= 0) {
        nas_level = level < have_level ? level : have_level;
        use_simd = have_simd && level >= 2;
        tans_avx2 = nas_level >= 1;
    }
    return PyLong_FromLong(nas_level);
}

/* tans_state_at(words, W, h0, B) -> (h, cnt, buf): the golden decoder's (h, cnt, buf) at bit position
 * B, after starting with h0 words unread (see the top of the file). */
static PyObject *py_tans_state_at(PyObject *self, PyObject *args) {
    PyObject *ow;
    long long W, h0, B;
    if (!PyArg_ParseTuple(args, "OLLL", &ow, &W, &h0, &B)) return NULL;
    Buf w = {0};
    if (get_buf(ow, &w, 0, 0, "words")) { rel(&w); return NULL; }
    if (W < 1 || W > 32 || B < 0 || h0 < 0) {
        rel(&w);
        PyErr_SetString(PyExc_ValueError, "tans_state_at: bad arguments");
        return NULL;
    }
    int64_t h = B / W < h0 ? B / W : h0;
    int64_t cnt = B - h * W;
    if (cnt > 64) {
        rel(&w);
        PyErr_SetString(PyExc_ValueError, "tans_state_at: more than 64 buffered bits");
        return NULL;
    }
    uint64_t buf = bits_range((const uint8_t *)w.view.buf, (int64_t)w.view.len, h * W, B);
    rel(&w);
    return Py_BuildValue("LLK", (long long)h, (long long)cnt, (unsigned long long)buf);
}

/* tans_heads(words, W, R, N, los, his, Bs, states) -> the first block whose head is bad, or -1: the golden
 * stream_head of independent blocks b (words[los[b] .. his[b]), each a whole §8 stream) at once: its bit
 * position B (the marker's, below which the N final state indices of R bits lie, lane 0's on top) and the
 * states after them, lane k at states[b * N + k]. A block is bad where its last word holds no marker or its
 * words end inside the final states (the golden messages: the caller decodes it alone to name them). */
static PyObject *py_tans_heads(PyObject *self, PyObject *args) {
    PyObject *ow, *olo, *ohi, *oB, *oX;
    long long W, R, N;
    if (!PyArg_ParseTuple(args, "OLLLOOOO", &ow, &W, &R, &N, &olo, &ohi, &oB, &oX)) return NULL;
    Buf w = {0}, lo = {0}, hi = {0}, bb = {0}, xx = {0};
    PyObject *res = NULL;
    if (get_buf(ow, &w, 0, 0, "tans_heads words") || get_buf(olo, &lo, 0, 8, "tans_heads los") ||
        get_buf(ohi, &hi, 0, 8, "tans_heads his") || get_buf(oB, &bb, 1, 8, "tans_heads Bs") ||
        get_buf(oX, &xx, 1, 8, "tans_heads states"))
        goto out;
    int64_t nb = NITEMS(lo), nw = NITEMS(w);
    if (!(W == 8 * w.view.itemsize && (W == 8 || W == 16 || W == 32)) || R < 1 || R > 16 || N < 1 || N > MAXN ||
        NITEMS(hi) != nb || NITEMS(bb) != nb || NITEMS(xx) != nb * N) {
        PyErr_SetString(PyExc_ValueError, "tans_heads: inconsistent arguments");
        goto out;
    }
    const int64_t *l = (const int64_t *)lo.view.buf, *h = (const int64_t *)hi.view.buf;
    int64_t *Bo = (int64_t *)bb.view.buf, *Xo = (int64_t *)xx.view.buf;
    const uint8_t *p = (const uint8_t *)w.view.buf;
    int64_t bad = -1;
    for (int64_t b = 0; b < nb && bad < 0; b++) {
        if (l[b] < 0 || h[b] < l[b] || h[b] > nw) {
            PyErr_Format(PyExc_ValueError, "tans_heads: block %lld's words outside the words", (long long)b);
            goto out;
        }
        if (h[b] == l[b]) { bad = b; break; }
        uint64_t top = bits_range(p, (int64_t)w.view.len, (h[b] - 1) * W, h[b] * W);
        if (top == 0) { bad = b; break; }
        int64_t B = (h[b] - 1) * W + (63 - __builtin_clzll(top));
        for (int64_t k = 0; k < N; k++) {
            if (B - R < l[b] * W) { bad = b; break; }
            B -= R;
            Xo[b * N + k] = (int64_t)bits_range(p, (int64_t)w.view.len, B, B + R);
        }
        Bo[b] = B;
    }
    res = PyLong_FromLongLong(bad);
out:
    rel(&w); rel(&lo); rel(&hi); rel(&bb); rel(&xx);
    return res;
}

/* ---------------------------------------------------------------------------------------------- */
/* tANS encode (pairs back to front, docs/bitstream.md §3 and §8).
 *
 * Per (table, symbol) entry: bits 0..15 thr = f << (R + 1 - bitlen f), 16..23 nbh = R + 1 -
 * bitlen f, 24..31 k (additional-data width), 32..63 off = cum - f (signed): the next state is
 * L + enc[off + (X >> n)]. Bits go out through a 64-bit accumulator stored 8 bytes at a time
 * (the buffer has 8 bytes of slack), so the bytes are the golden coder's W-bit words. */

/* What one coding step of symbol s needs, built per call from the packed entries: n = (Y + delta) >> 16
 * is nbh - (Y < thr) for every state Y in [L, 2L) (FSE's trick: an add and a shift instead of a compare
 * and a subtract on the state's chain), and the next state is tp[Y >> n], tp = the spread (with L
 * added) + cum - f: one load whose address needs no further add. */
typedef struct {
    const uint16_t *tp;
    uint32_t delta, k;
} EncSym;

typedef struct {
    const int64_t *run_tab, *run_end;
    int64_t n_runs;
    const EncSym *est;    /* ntab * width */
    const uint64_t *esym; /* ntab * width */
    const int64_t *nsym;  /* per table */
    int64_t width;
    const uint16_t *enc;  /* ntab * L */
    int64_t L, R, W;
    int64_t interval;
    uint8_t *out, *out_end;
    int64_t *cps;
    int64_t cps_rows;
    /* the AVX-512 encoder's tables (N = 16, u8 symbols; NULL where it does not run): per table 3 x 64
     * int32 (nas_avx512_tans_enc16), vok[t] whether table t has them; encl: the spreads with L added */
    const int32_t *vtab;
    const uint8_t *vok;
    const uint16_t *encl;
    int merge;
} TansEnc;

#define T_THR(e) ((uint32_t)(e) & 0xffffu)
#define T_NBH(e) ((unsigned)((e) >> 16) & 0xffu)
#define T_K(e) ((unsigned)((e) >> 24) & 0xffu)
#define T_OFF(e) ((int32_t)((e) >> 32))

#define PUT(v, n) do { acc |= (uint64_t)(v) << cnt; cnt += (n); } while (0)
#define FLUSH()                                                                                        \
    do {                                                                                               \
        if (UNLIKELY(o + 8 > d->out_end)) goto overflow;                                               \
        uint64_t a_ = acc;                                                                             \
        memcpy(o, &a_, 8);                                                                             \
        o += cnt >> 3;                                                                                 \
        acc >>= (cnt & 56u);                                                                           \
        cnt &= 7u;                                                                                     \
    } while (0)

/* One pair i (symbol s, extra x) with state Y (in [L, 2L)). The pair's bits (n low bits of the state, then
 * the k bits of x above them) go into the accumulator with one shift and or: the accumulator's chain
 * (cnt, acc) is the encoder's only serial dependency across lanes, so it gets one add per pair. The
 * accumulator is stored every F pairs (FL = 1 there): F pairs of at most `most` bits each fit its 63
 * low bits above the <= 7 bits a store leaves (the caller picks F from the tables' widest pair). The
 * state's next index stays inside the spread for every legal table (checked once before coding). */
#define ENC_STEP(Y, I, FL)                                                                             \
    do {                                                                                               \
        int64_t s_ = (int64_t)syms[I];                                                                 \
        uint64_t x_ = (uint64_t)exs[I];                                                                \
        if (UNLIKELY((uint64_t)s_ >= (uint64_t)nsym_t)) { bad = (I); goto badpair; }                   \
        const EncSym *q_ = es_t + s_;                                                                  \
        unsigned k_ = q_->k;                                                                           \
        if (UNLIKELY(x_ >> k_)) { bad = (I); goto badpair; }                                           \
        unsigned n_ = (Y + q_->delta) >> 16;                                                           \
        acc |= ((uint64_t)(Y & ((1u << n_) - 1u)) | (x_ << n_)) << cnt; /* n_ <= 16 */                 \
        cnt += n_ + k_;                                                                                \
        Y = q_->tp[Y >> n_];                                                                           \
        if (FL) {                                                                                      \
            uint64_t a_ = acc;                                                                         \
            memcpy(o, &a_, 8);                                                                         \
            o += cnt >> 3;                                                                             \
            acc >>= (cnt & 56u);                                                                       \
            cnt &= 7u;                                                                                 \
        }                                                                                              \
    } while (0)

/* Whether every (table, symbol)'s next index off + (Y >> n) stays in [0, L) for every state Y in [L, 2L)
 * (Y >> n is monotonic on each side of the threshold, so the two ends of each side suffice), and the
 * widest pair's bit count; 0 or -1 (a table that leaves its spread: status 2). */
static int tans_enc_check(const TansEnc *d, int64_t ntab, unsigned *most) {
    const int64_t L = d->L;
    unsigned w = 0;
    for (int64_t t = 0; t < ntab; t++)
        for (int64_t s = 0; s < d->nsym[t]; s++) {
            uint64_t e = d->esym[t * d->width + s];
            int64_t thr = T_THR(e), nbh = T_NBH(e), off = T_OFF(e);
            int64_t ys[4] = {L, thr - 1, thr, 2 * L - 1};
            for (int q = 0; q < 4; q++) {
                int64_t y = ys[q];
                if (y < L || y >= 2 * L) continue;
                int64_t n = nbh - (y < thr);
                if (n < 0 || n > 31) return -1;
                int64_t j = off + (y >> n);
                if (j < 0 || j >= L) return -1;
                if ((unsigned)(n + T_K(e)) > w) w = (unsigned)(n + T_K(e));
            }
        }
    *most = w;
    return 0;
}

/* returns 0; 1 a pair outside its table (its index in *nw_out), 2 a table whose encode step leaves
 * it (never for a legal table), 3 output overflow (never with the caller's capacity). F: pairs per
 * accumulator store (1, 2 or 3; see ENC_STEP). */
INLINE int64_t tans_enc_core(const TansEnc *d, const void *syms_, const void *exs_, int64_t n, const int N,
                             const int KIND, const int F, int64_t *nw_out, int64_t *nc_out) {
    const int64_t L = d->L;
    uint8_t *o = d->out;
    uint64_t acc = 0;
    unsigned cnt = 0;
    uint32_t Y[MAXN];
    for (int k = 0; k < N; k++) Y[k] = (uint32_t)L;
    int64_t nc = 0, bad = -1;
    int64_t r = d->n_runs - 1;
    int64_t i = n - 1;
    const int64_t interval = d->interval;
    const uint8_t *s8 = (const uint8_t *)syms_;
    const int64_t *s64 = (const int64_t *)syms_;
    const uint32_t *e32 = (const uint32_t *)exs_;
    const uint64_t *e64 = (const uint64_t *)exs_;
    /* a block of N pairs advances at most 8 bytes a pair and stores 8 bytes: blocks run while that
     * room is left, the single pairs after them check each store */
    const int64_t room = 8 * (N + 2);
    while (i >= 0) {
        while (r > 0 && d->run_end[r - 1] > i) r--;
        int64_t run_start = r > 0 ? d->run_end[r - 1] : 0;
        int64_t cp = (interval > 0 && i > 0) ? (i / interval) * interval : 0;
        int64_t lo = run_start > cp ? run_start : cp;
        int64_t t = d->run_tab[r];
        const EncSym *es_t = d->est + t * d->width;
        const int64_t nsym_t = d->nsym[t];
        if (KIND == OUT_SE8) {
            const uint8_t *syms = s8;
            const uint32_t *exs = e32;
            if (N == 16 && d->vtab && d->vok[t])
                i = nas_avx512_tans_enc16(d->vtab + 192 * t, nsym_t, d->encl, syms, exs, i, lo, Y, &acc, &cnt, &o,
                                          d->out_end, d->merge);
            while (i - N + 1 >= lo && LIKELY(d->out_end - o >= room)) {
#pragma GCC unroll 16
                for (int k = 0; k < N; k++) ENC_STEP(Y[k], i - k, (k % F == F - 1 || k == N - 1));
                i -= N;
            }
            while (i >= lo) {
                if (UNLIKELY(o + 8 > d->out_end)) goto overflow;
                ENC_STEP(Y[0], i, 1);
                uint32_t y0 = Y[0];
                for (int k = 0; k + 1 < N; k++) Y[k] = Y[k + 1];
                Y[N - 1] = y0;
                i--;
            }
        } else {
            const int64_t *syms = s64;
            const uint64_t *exs = e64;
            while (i - N + 1 >= lo && LIKELY(d->out_end - o >= room)) {
#pragma GCC unroll 16
                for (int k = 0; k < N; k++) ENC_STEP(Y[k], i - k, (k % F == F - 1 || k == N - 1));
                i -= N;
            }
            while (i >= lo) {
                if (UNLIKELY(o + 8 > d->out_end)) goto overflow;
                ENC_STEP(Y[0], i, 1);
                uint32_t y0 = Y[0];
                for (int k = 0; k + 1 < N; k++) Y[k] = Y[k + 1];
                Y[N - 1] = y0;
                i--;
            }
        }
        if (cp > 0 && lo == cp && i == cp - 1) {
            if (nc >= d->cps_rows) goto overflow;
            int64_t bits = (int64_t)(o - d->out) * 8 + cnt;
            int64_t *row = d->cps + nc * (3 + N);
            row[0] = cp;
            row[1] = bits / d->W;
            row[2] = bits % d->W;
            /* Y[j] is the state of pair i - j: lane l is j = (i - l) mod N */
            for (int l = 0; l < N; l++) row[3 + l] = (int64_t)Y[(((i - l) % N) + N) % N] - L;
            nc++;
        }
    }
    /* flush: X_{N-1} .. X_0 (R bits each), then the marker; i = -1 here: lane l is Y[(N - 1 - l)] */
    for (int l = N - 1; l >= 0; l--) {
        PUT((uint64_t)Y[N - 1 - l] - (uint64_t)L, (unsigned)d->R);
        FLUSH();
    }
    PUT(1, 1);
    FLUSH();
    {
        if (o + 8 > d->out_end) goto overflow;
        uint64_t a_ = acc;
        memcpy(o, &a_, 8);
        int64_t bits = (int64_t)(o - d->out) * 8 + cnt;
        *nw_out = (bits + d->W - 1) / d->W;
        *nc_out = nc;
    }
    return 0;
badpair:
    *nw_out = bad;
    return 1;
overflow:
    return 3;
}

/* Each instantiation twice: portable, and with BMI2 (shlx/shrx/bzhi: a variable shift is one
 * instruction without the cl register, chosen at run time like the decoder's pdep). */
#define ENC_FN(NAME, ATTR, NN, KIND, F)                                                               \
    ATTR static int64_t NAME(const TansEnc *d, const void *s, const void *e, int64_t n, int64_t *nw, int64_t *nc) { \
        return tans_enc_core(d, s, e, n, NN, KIND, F, nw, nc);                                        \
    }
#ifdef HAVE_PDEP
#define ATTR_BMI2 __attribute__((target("bmi2")))
#else
#define ATTR_BMI2
#endif
#define ENC_INST(NN)                                                                                  \
    ENC_FN(tans_enc_n##NN##_k0_f1, , NN, OUT_SE8, 1) ENC_FN(tans_enc_n##NN##_k1_f1, , NN, OUT_SE64, 1)  \
    ENC_FN(tans_enc_n##NN##_k0_f2, , NN, OUT_SE8, 2) ENC_FN(tans_enc_n##NN##_k1_f2, , NN, OUT_SE64, 2)  \
    ENC_FN(tans_enc_n##NN##_k0_f3, , NN, OUT_SE8, 3) ENC_FN(tans_enc_n##NN##_k1_f3, , NN, OUT_SE64, 3)  \
    ENC_FN(tans_enc_n##NN##_k0_f1b, ATTR_BMI2, NN, OUT_SE8, 1)                                        \
    ENC_FN(tans_enc_n##NN##_k1_f1b, ATTR_BMI2, NN, OUT_SE64, 1)                                       \
    ENC_FN(tans_enc_n##NN##_k0_f2b, ATTR_BMI2, NN, OUT_SE8, 2)                                        \
    ENC_FN(tans_enc_n##NN##_k1_f2b, ATTR_BMI2, NN, OUT_SE64, 2)                                       \
    ENC_FN(tans_enc_n##NN##_k0_f3b, ATTR_BMI2, NN, OUT_SE8, 3)                                        \
    ENC_FN(tans_enc_n##NN##_k1_f3b, ATTR_BMI2, NN, OUT_SE64, 3)

ENC_INST(1) ENC_INST(2) ENC_INST(3) ENC_INST(4) ENC_INST(5) ENC_INST(6) ENC_INST(7) ENC_INST(8)
ENC_INST(9) ENC_INST(10) ENC_INST(11) ENC_INST(12) ENC_INST(13) ENC_INST(14) ENC_INST(15) ENC_INST(16)

typedef int64_t (*tans_enc_fn)(const TansEnc *, const void *, const void *, int64_t, int64_t *, int64_t *);
#define EFN(NN) {{{tans_enc_n##NN##_k0_f1, tans_enc_n##NN##_k0_f2, tans_enc_n##NN##_k0_f3},               \
                  {tans_enc_n##NN##_k1_f1, tans_enc_n##NN##_k1_f2, tans_enc_n##NN##_k1_f3}},              \
                 {{tans_enc_n##NN##_k0_f1b, tans_enc_n##NN##_k0_f2b, tans_enc_n##NN##_k0_f3b},            \
                  {tans_enc_n##NN##_k1_f1b, tans_enc_n##NN##_k1_f2b, tans_enc_n##NN##_k1_f3b}}}
/* [N][BMI2][kind][F - 1] */
static const tans_enc_fn TANS_ENC[MAXN + 1][2][2][3] = {{{{0, 0, 0}, {0, 0, 0}}, {{0, 0, 0}, {0, 0, 0}}}, EFN(1), EFN(2), EFN(3), EFN(4), EFN(5), EFN(6), EFN(7),
                                                  EFN(8), EFN(9), EFN(10), EFN(11), EFN(12), EFN(13), EFN(14),
                                                  EFN(15), EFN(16)};

/* tans_encode(syms, exs, run_tab, run_end, esym, nsym, enc, R, W, N, interval, out, cps) -> (status, nw, nc)
 * status as tans_enc_core (1: nw is the bad pair; the caller raises the golden error). syms u8 with
 * exs u32, or syms i64 with exs u64. */
static PyObject *py_tans_encode(PyObject *self, PyObject *args) {
    PyObject *os_, *oe_, *ort, *ore, *oes, *ons, *oenc, *oout, *ocps;
    long long R, W, N, interval;
    if (!PyArg_ParseTuple(args, "OOOOOOOLLLLOO", &os_, &oe_, &ort, &ore, &oes, &ons, &oenc, &R, &W, &N, &interval,
                          &oout, &ocps))
        return NULL;
    Buf s = {0}, e = {0}, rt = {0}, re = {0}, es = {0}, ns = {0}, enc = {0}, out = {0}, cps = {0};
    PyObject *res = NULL;
    if (get_buf(os_, &s, 0, 0, "syms") || get_buf(oe_, &e, 0, 0, "exs") || get_buf(ort, &rt, 0, 8, "run_tab") ||
        get_buf(ore, &re, 0, 8, "run_end") || get_buf(oes, &es, 0, 8, "esym") || get_buf(ons, &ns, 0, 8, "nsym") ||
        get_buf(oenc, &enc, 0, 2, "enc") || get_buf(oout, &out, 1, 1, "out") || get_buf(ocps, &cps, 1, 8, "cps"))
        goto out;
    {
        int kind = s.view.itemsize == 1 && e.view.itemsize == 4 ? OUT_SE8
                   : s.view.itemsize == 8 && e.view.itemsize == 8 ? OUT_SE64 : -1;
        int64_t n = NITEMS(s), ntab = NITEMS(ns), L = (int64_t)1 << (R > 0 && R < 16 ? R : 0), n_runs;
        int64_t width = ntab ? NITEMS(es) / ntab : 0;
        if (kind < 0 || NITEMS(e) != n || R < 1 || R > 15 || W < 8 || W > 32 || W % 8 || N < 1 || N > MAXN ||
            interval < 0 || ntab < 1 || width * ntab != NITEMS(es) || NITEMS(enc) != ntab * L ||
            NITEMS(cps) % (3 + N)) {
            PyErr_SetString(PyExc_ValueError, "tans_encode: inconsistent arguments");
            goto out;
        }
        if (check_runs_arrays(&rt, &re, ntab, &n_runs)) goto out;
        const int64_t *rend = (const int64_t *)re.view.buf;
        if (n_runs < 2 ? n != 0 : rend[n_runs - 2] != n) {
            PyErr_SetString(PyExc_ValueError, "tans_encode: runs do not cover the pairs");
            goto out;
        }
        const int64_t *nsym = (const int64_t *)ns.view.buf;
        for (int64_t t = 0; t < ntab; t++)
            if (nsym[t] < 0 || nsym[t] > width) {
                PyErr_SetString(PyExc_ValueError, "tans_encode: symbol count outside the table");
                goto out;
            }
        EncSym *est = (EncSym *)malloc((size_t)(ntab * width) * sizeof(EncSym) + 1);
        /* 2 bytes of slack: the vector encoder gathers 4 bytes at each entry */
        uint16_t *encl = (uint16_t *)malloc((size_t)(ntab * L) * sizeof(uint16_t) + 4);
        if (!est || !encl) {
            free(est); free(encl);
            PyErr_NoMemory();
            goto out;
        }
        const uint16_t *enc0 = (const uint16_t *)enc.view.buf;
        const uint64_t *esym0 = (const uint64_t *)es.view.buf;
        for (int64_t i = 0; i < ntab * L; i++) encl[i] = (uint16_t)(enc0[i] + L); /* < 2L <= 2^16 */
        for (int64_t i = 0; i < ntab * width; i++) {
            uint64_t q = esym0[i];
            /* tp may point outside the spread for an illegal table: tans_enc_check refuses those first */
            est[i].tp = (const uint16_t *)((uintptr_t)(encl + (i / width) * L) + 2 * (uintptr_t)(intptr_t)T_OFF(q));
            est[i].delta = ((uint32_t)T_NBH(q) << 16) - T_THR(q);
            est[i].k = T_K(q);
        }
        TansEnc d = {(const int64_t *)rt.view.buf, rend, n_runs - 1, est, (const uint64_t *)es.view.buf, nsym, width,
                     (const uint16_t *)enc.view.buf, L, R, W, interval, (uint8_t *)out.view.buf,
                     (uint8_t *)out.view.buf + out.view.len, (int64_t *)cps.view.buf, NITEMS(cps) / (3 + N),
                     NULL, NULL, encl, 0};
        int64_t nw = 0, nc = 0, status = 2;
        unsigned most = 0;
        int32_t *vtab = NULL;
        uint8_t *vok = NULL;
        Py_BEGIN_ALLOW_THREADS
        if (tans_enc_check(&d, ntab, &most) == 0) {
            /* F pairs of `most` bits each above the 7 bits a store leaves, 63 bits at most: a store
             * shifts the accumulator by cnt & 56, which is 0, not 64, where cnt reaches 64 (three
             * 19-bit pairs after 7 bits, bf16 escapes with R = 8, left stale bits under the next pairs) */
            int F = 7 + 3 * most <= 63 ? 3 : 7 + 2 * most <= 63 ? 2 : 1;
            /* The AVX-512 encoder: 16 states, byte symbols, pairs of at most 32 bits (a lane's width), tables
             * of at most 64 symbols (four registers a field), spread indices within int32 */
            if (nas_level >= 2 && N == 16 && kind == OUT_SE8 && most <= 32 && ntab * L < ((int64_t)1 << 30)) {
                vtab = (int32_t *)calloc((size_t)(192 * ntab), sizeof(int32_t));
                vok = (uint8_t *)calloc((size_t)ntab, 1);
                if (vtab && vok) {
                    for (int64_t t = 0; t < ntab; t++) {
                        if (nsym[t] > 64) continue;
                        for (int64_t q = 0; q < nsym[t]; q++) {
                            const EncSym *x = est + t * width + q;
                            vtab[192 * t + q] = (int32_t)x->delta;
                            vtab[192 * t + 64 + q] = (int32_t)x->k;
                            vtab[192 * t + 128 + q] = (int32_t)(t * L + T_OFF(esym0[t * width + q]));
                        }
                        vok[t] = 1;
                    }
                    d.vtab = vtab;
                    d.vok = vok;
                    d.merge = 2 * most <= 56;
                }
            }
            status = TANS_ENC[N][use_bmi2][kind][F - 1](&d, s.view.buf, e.view.buf, n, &nw, &nc);
        }
        Py_END_ALLOW_THREADS
        free(vtab);
        free(vok);
        free(est);
        free(encl);
        res = Py_BuildValue("LLL", (long long)status, (long long)nw, (long long)nc);
    }
out:
    rel(&s); rel(&e); rel(&rt); rel(&re); rel(&es); rel(&ns); rel(&enc); rel(&out); rel(&cps);
    return res;
}

/* ---------------------------------------------------------------------------------------------- */
/* rANS (docs/bitstream.md §4 and §8): states of S <= 64 bits, words of W in {8, 16, 32} bits. One
 * state (N = 1) pops a word when x < 2^(S-W) and words remain; N > 1 states pop exactly then, and
 * no word left is an error. Decoder's symbol lookup: a table of 2^P symbols when P <= 16, else a
 * binary search over cum. Not specialized per N: the interleaved tANS codecs are the fast path. */

INLINE uint64_t word_at(const uint8_t *p, int isz, int64_t a) {
    if (isz == 4) { uint32_t v; memcpy(&v, p + 4 * a, 4); return v; }
    if (isz == 2) { uint16_t v; memcpy(&v, p + 2 * a, 2); return v; }
    return p[a];
}

INLINE void word_put(uint8_t *p, int isz, int64_t a, uint64_t v) {
    if (isz == 4) { uint32_t u = (uint32_t)v; memcpy(p + 4 * a, &u, 4); }
    else if (isz == 2) { uint16_t u = (uint16_t)v; memcpy(p + 2 * a, &u, 2); }
    else p[a] = (uint8_t)v;
}

/* rANS decode core: the word width, output kind and symbol lookup are compile-time constants in each
 * instantiation (RANS_DEC), so the per-pair loop has no branches on them. */
typedef struct {
    const uint8_t *p;
    uint64_t *xs;
    int64_t N;
    const int64_t *freq, *cum, *nsym, *nch, *chb;
    const uint16_t *lt;
    const int64_t *run_tab, *run_end;
    int64_t width, most;
    unsigned P, S, W;
    void *out_s, *out_e;
    int64_t out0;
} RansDec;

INLINE int64_t rans_dec_core(const RansDec *d, int64_t *hp, int64_t pos, int64_t stop, const int ISZ, const int KIND,
                             const int LUT) {
    const uint8_t *p = d->p;
    uint64_t *xs = d->xs;
    const int64_t N = d->N, width = d->width, most = d->most, out0 = d->out0;
    const unsigned uP = d->P, uW = d->W;
    const uint64_t lo_bound = (uint64_t)1 << (d->S - d->W), pmask = lowmask(uP);
    int64_t hh = *hp, status = -1, lane = pos % N;
    int64_t r = 0;
    while (d->run_end[r] <= pos) r++;
    while (pos < stop) {
        int64_t end = d->run_end[r] < stop ? d->run_end[r] : stop;
        int64_t t = d->run_tab[r];
        const int64_t *freq_t = d->freq + t * width, *cum_t = d->cum + t * width, *nch_t = d->nch + t * width;
        const uint16_t *lt_t = d->lt + (LUT ? (t << uP) : 0);
        uint64_t x = xs[lane];
        while (pos < end) {
            uint64_t q = x & pmask;
            int64_t sidx;
            if (LUT) sidx = lt_t[q];
            else {
                int64_t lo = 0, hi = d->nsym[t] - 1;
                while (lo < hi) {
                    int64_t mid = (lo + hi + 1) >> 1;
                    if ((uint64_t)cum_t[mid] <= q) lo = mid; else hi = mid - 1;
                }
                sidx = lo;
            }
            x = (x >> uP) * (uint64_t)freq_t[sidx] + q - (uint64_t)cum_t[sidx];
            if (x < lo_bound) {
                if (hh > 0) { hh--; x = (x << uW) | word_at(p, ISZ, hh); }
                else if (N > 1) { status = pos; break; }
            }
            uint64_t e = 0;
            int64_t nchunk = nch_t[sidx];
            const int64_t *chb_i = d->chb + (t * width + sidx) * most;
            for (int64_t k = 0; k < nchunk; k++) {
                unsigned b = (unsigned)chb_i[k], sh = uP - b;
                q = x & pmask;
                e = (e << b) | (q >> sh);
                x = ((x >> uP) << sh) | (q & lowmask(sh));
                if (x < lo_bound) {
                    if (hh > 0) { hh--; x = (x << uW) | word_at(p, ISZ, hh); }
                    else if (N > 1) { status = pos; break; }
                }
            }
            if (status >= 0) break;
            if (N > 1) {
                xs[lane] = x;
                if (++lane == N) lane = 0;
                x = xs[lane];
            }
            if (pos >= out0) {
                if (KIND == OUT_SE8) {
                    ((uint8_t *)d->out_s)[pos - out0] = (uint8_t)sidx;
                    ((uint32_t *)d->out_e)[pos - out0] = (uint32_t)e;
                } else {
                    ((int64_t *)d->out_s)[pos - out0] = sidx;
                    ((uint64_t *)d->out_e)[pos - out0] = e;
                }
            }
            pos++;
        }
        if (N == 1 && status < 0) xs[0] = x;
        if (status >= 0) break;
        r++;
    }
    *hp = hh;
    return status;
}

#define RDEC(ISZ, KIND, LUT)                                                                          \
    static int64_t rans_dec_##ISZ##_##KIND##_##LUT(const RansDec *d, int64_t *hp, int64_t pos, int64_t stop) { \
        return rans_dec_core(d, hp, pos, stop, ISZ, KIND, LUT);                                        \
    }
RDEC(1, 0, 0) RDEC(1, 0, 1) RDEC(1, 1, 0) RDEC(1, 1, 1) RDEC(2, 0, 0) RDEC(2, 0, 1) RDEC(2, 1, 0) RDEC(2, 1, 1)
RDEC(4, 0, 0) RDEC(4, 0, 1) RDEC(4, 1, 0) RDEC(4, 1, 1)
typedef int64_t (*rans_dec_fn)(const RansDec *, int64_t *, int64_t, int64_t);
static const rans_dec_fn RANS_DEC[3][2][2] = {
    {{rans_dec_1_0_0, rans_dec_1_0_1}, {rans_dec_1_1_0, rans_dec_1_1_1}},
    {{rans_dec_2_0_0, rans_dec_2_0_1}, {rans_dec_2_1_0, rans_dec_2_1_1}},
    {{rans_dec_4_0_0, rans_dec_4_0_1}, {rans_dec_4_1_0, rans_dec_4_1_1}}};

/* rans_decode(words, h, states(u64[N]), freq, cum, nsym, lut(u16 [ntab, 2^P] or empty), nchunk,
 *             chunk_b, run_tab, run_end, pos, stop, W, P, S, out_s, out_e, out0) -> (status, h) */
static PyObject *py_rans_decode(PyObject *self, PyObject *args) {
    PyObject *ow, *ost, *of, *oc, *ons, *olut, *onc, *ocb, *ort, *ore, *oos, *ooe;
    long long h, pos, stop, W, P, S, out0;
    if (!PyArg_ParseTuple(args, "OLOOOOOOOOOLLLLLOOL", &ow, &h, &ost, &of, &oc, &ons, &olut, &onc, &ocb, &ort, &ore,
                          &pos, &stop, &W, &P, &S, &oos, &ooe, &out0))
        return NULL;
    Buf w = {0}, st = {0}, f = {0}, c = {0}, ns = {0}, lut = {0}, nc = {0}, cb = {0}, rt = {0}, re = {0}, os = {0},
        oe = {0};
    PyObject *res = NULL;
    if (get_buf(ow, &w, 0, 0, "words") || get_buf(ost, &st, 1, 8, "states") || get_buf(of, &f, 0, 8, "freq") ||
        get_buf(oc, &c, 0, 8, "cum") || get_buf(ons, &ns, 0, 8, "nsym") || get_buf(olut, &lut, 0, 2, "lut") ||
        get_buf(onc, &nc, 0, 8, "nchunk") || get_buf(ocb, &cb, 0, 8, "chunk_b") || get_buf(ort, &rt, 0, 8, "run_tab") ||
        get_buf(ore, &re, 0, 8, "run_end") || get_buf(oos, &os, 1, 0, "out_s") || get_buf(ooe, &oe, 1, 0, "out_e"))
        goto out;
    {
        int kind = os.view.itemsize == 1 && oe.view.itemsize == 4 ? OUT_SE8
                   : os.view.itemsize == 8 && oe.view.itemsize == 8 ? OUT_SE64 : -1;
        int64_t N = NITEMS(st), ntab = NITEMS(ns), n_runs;
        int64_t width = ntab ? NITEMS(f) / ntab : 0, most = (ntab && width) ? NITEMS(cb) / (ntab * width) : 0;
        int isz = (int)w.view.itemsize;
        int use_lut = P <= 16;
        if (kind < 0 || N < 1 || N > MAXN || ntab < 1 || width < 1 || NITEMS(c) != ntab * width ||
            NITEMS(nc) != ntab * width || most < 1 || NITEMS(cb) != ntab * width * most || W != 8 * isz ||
            (isz != 1 && isz != 2 && isz != 4) || P < 1 || P > 32 || S > 64 || S < W + P ||
            (use_lut && NITEMS(lut) != ntab * ((int64_t)1 << P)) || h < 0 || h > NITEMS(w) || pos > stop ||
            out0 > stop || stop - out0 > NITEMS(os) || NITEMS(os) != NITEMS(oe)) {
            PyErr_SetString(PyExc_ValueError, "rans_decode: inconsistent arguments");
            goto out;
        }
        if (check_runs_arrays(&rt, &re, ntab, &n_runs)) goto out;
        const int64_t *nsym = (const int64_t *)ns.view.buf, *freq = (const int64_t *)f.view.buf,
                      *cum = (const int64_t *)c.view.buf, *nch = (const int64_t *)nc.view.buf,
                      *chb = (const int64_t *)cb.view.buf, *run_tab = (const int64_t *)rt.view.buf,
                      *run_end = (const int64_t *)re.view.buf;
        const uint16_t *lt = (const uint16_t *)lut.view.buf;
        for (int64_t t = 0; t < ntab; t++) {
            if (nsym[t] < 1 || nsym[t] > width) goto badtab;
            for (int64_t s = 0; s < nsym[t]; s++) {
                int64_t i = t * width + s;
                if (freq[i] < 1 || cum[i] < 0 || cum[i] + freq[i] > ((int64_t)1 << P) || nch[i] < 0 || nch[i] > most)
                    goto badtab;
                for (int64_t k = 0; k < nch[i]; k++)
                    if (chb[i * most + k] < 1 || chb[i * most + k] > P) goto badtab;
            }
            if (use_lut)
                for (int64_t q = 0; q < ((int64_t)1 << P); q++)
                    if (lt[(t << P) + q] >= nsym[t]) goto badtab;
        }
        RansDec d = {(const uint8_t *)w.view.buf, (uint64_t *)st.view.buf, N, freq, cum, nsym, nch, chb, lt,
                     run_tab, run_end, width, most, (unsigned)P, (unsigned)S, (unsigned)W, os.view.buf, oe.view.buf,
                     out0};
        int64_t status = -1, hh = h;
        Py_BEGIN_ALLOW_THREADS
        int li = use_lut ? 1 : 0, ki = kind == OUT_SE8 ? 0 : 1, wi = isz == 4 ? 2 : isz == 2 ? 1 : 0;
        status = RANS_DEC[wi][ki][li](&d, &hh, pos, stop);
        Py_END_ALLOW_THREADS
        res = Py_BuildValue("LL", (long long)status, (long long)hh);
        goto out;
    badtab:
        PyErr_SetString(PyExc_ValueError, "rans_decode: table outside its limits");
    }
out:
    rel(&w); rel(&st); rel(&f); rel(&c); rel(&ns); rel(&lut); rel(&nc); rel(&cb); rel(&rt); rel(&re); rel(&os);
    rel(&oe);
    return res;
}

/* rans_encode(syms, exs, run_tab, run_end, freq, cum, nsym, kb, nchunk, chunk_b, P, S, W, N, interval,
 *             out (words of W bits), cps (u64 [rows, 3 + N])) -> (status, nw_or_bad, nc) */
static PyObject *py_rans_encode(PyObject *self, PyObject *args) {
    PyObject *os_, *oe_, *ort, *ore, *of, *oc, *ons, *okb, *onc, *ocb, *oout, *ocps;
    long long P, S, W, N, interval;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOLLLLLOO", &os_, &oe_, &ort, &ore, &of, &oc, &ons, &okb, &onc, &ocb, &P, &S,
                          &W, &N, &interval, &oout, &ocps))
        return NULL;
    Buf s = {0}, e = {0}, rt = {0}, re = {0}, f = {0}, c = {0}, ns = {0}, kb = {0}, nc = {0}, cb = {0}, out = {0},
        cps = {0};
    PyObject *res = NULL;
    if (get_buf(os_, &s, 0, 0, "syms") || get_buf(oe_, &e, 0, 0, "exs") || get_buf(ort, &rt, 0, 8, "run_tab") ||
        get_buf(ore, &re, 0, 8, "run_end") || get_buf(of, &f, 0, 8, "freq") || get_buf(oc, &c, 0, 8, "cum") ||
        get_buf(ons, &ns, 0, 8, "nsym") || get_buf(okb, &kb, 0, 8, "kb") || get_buf(onc, &nc, 0, 8, "nchunk") ||
        get_buf(ocb, &cb, 0, 8, "chunk_b") || get_buf(oout, &out, 1, 0, "out") || get_buf(ocps, &cps, 1, 8, "cps"))
        goto out;
    {
        int kind = s.view.itemsize == 1 && e.view.itemsize == 4 ? OUT_SE8
                   : s.view.itemsize == 8 && e.view.itemsize == 8 ? OUT_SE64 : -1;
        int64_t n = NITEMS(s), ntab = NITEMS(ns), n_runs;
        int64_t width = ntab ? NITEMS(f) / ntab : 0, most = (ntab && width) ? NITEMS(cb) / (ntab * width) : 0;
        int isz = (int)out.view.itemsize;
        if (kind < 0 || NITEMS(e) != n || N < 1 || N > MAXN || ntab < 1 || width < 1 || NITEMS(c) != ntab * width ||
            NITEMS(kb) != ntab * width || NITEMS(nc) != ntab * width || most < 1 ||
            NITEMS(cb) != ntab * width * most || W != 8 * isz || (isz != 1 && isz != 2 && isz != 4) || P < 1 ||
            P > 32 || S > 64 || S < W + P || interval < 0 || NITEMS(cps) % (3 + N)) {
            PyErr_SetString(PyExc_ValueError, "rans_encode: inconsistent arguments");
            goto out;
        }
        if (check_runs_arrays(&rt, &re, ntab, &n_runs)) goto out;
        const int64_t *run_tab = (const int64_t *)rt.view.buf, *run_end = (const int64_t *)re.view.buf;
        if (n_runs < 2 ? n != 0 : run_end[n_runs - 2] != n) {
            PyErr_SetString(PyExc_ValueError, "rans_encode: runs do not cover the pairs");
            goto out;
        }
        const int64_t *nsym = (const int64_t *)ns.view.buf, *freq = (const int64_t *)f.view.buf,
                      *cum = (const int64_t *)c.view.buf, *kbits = (const int64_t *)kb.view.buf,
                      *nch = (const int64_t *)nc.view.buf, *chb = (const int64_t *)cb.view.buf;
        for (int64_t t = 0; t < ntab; t++) {
            if (nsym[t] < 0 || nsym[t] > width) goto badtab;
            for (int64_t q = 0; q < nsym[t]; q++) {
                int64_t i = t * width + q;
                if (freq[i] < 1 || cum[i] < 0 || cum[i] + freq[i] > ((int64_t)1 << P) || nch[i] < 0 ||
                    nch[i] > most || kbits[i] < 0)
                    goto badtab;
                for (int64_t k = 0; k < nch[i]; k++)
                    if (chb[i * most + k] < 1 || chb[i * most + k] > P) goto badtab;
            }
        }
        uint8_t *o = (uint8_t *)out.view.buf;
        int64_t cap = NITEMS(out), rows = NITEMS(cps) / (3 + N);
        uint64_t *cp = (uint64_t *)cps.view.buf;
        const unsigned uP = (unsigned)P, uW = (unsigned)W, pshift = (unsigned)(S - P);
        const uint64_t wmask = lowmask(uW);
        uint64_t xs[MAXN];
        for (int k = 0; k < N; k++) xs[k] = N == 1 ? 0 : (uint64_t)1 << (S - W);
        int64_t nw = 0, ncp = 0, status = 0, bad = 0;
        const uint8_t *s8 = (const uint8_t *)s.view.buf;
        const int64_t *s64 = (const int64_t *)s.view.buf;
        const uint32_t *e32 = (const uint32_t *)e.view.buf;
        const uint64_t *e64 = (const uint64_t *)e.view.buf;
        Py_BEGIN_ALLOW_THREADS
        int64_t r = n_runs - 2;
        int64_t lane = n ? (n - 1) % N : 0;
        for (int64_t i = n - 1; i >= 0; i--) {
            while (r > 0 && run_end[r - 1] > i) r--;
            int64_t t = run_tab[r];
            int64_t sym = kind == OUT_SE8 ? (int64_t)s8[i] : s64[i];
            uint64_t ev = kind == OUT_SE8 ? (uint64_t)e32[i] : e64[i];
            if (sym < 0 || sym >= nsym[t]) { status = 1; bad = i; break; }
            int64_t ti = t * width + sym;
            if (kbits[ti] < 64 && (ev >> kbits[ti])) { status = 1; bad = i; break; }
            uint64_t x = xs[lane];
            for (int64_t k = nch[ti] - 1; k >= 0; k--) {
                unsigned b = (unsigned)chb[ti * most + k];
                uint64_t fu = (uint64_t)1 << (uP - b);
                uint64_t v = ev & lowmask(b);
                ev = b >= 64 ? 0 : ev >> b;
                if ((x >> pshift) >= fu) {
                    if (nw >= cap) { status = 3; break; }
                    word_put(o, isz, nw++, x & wmask);
                    x >>= uW;
                }
                x = ((x >> (uP - b)) << uP) | (v * fu + (x & (fu - 1)));
            }
            if (status) break;
            uint64_t fs = (uint64_t)freq[ti];
            if ((x >> pshift) >= fs) {
                if (nw >= cap) { status = 3; break; }
                word_put(o, isz, nw++, x & wmask);
                x >>= uW;
            }
            xs[lane] = ((x / fs) << uP) | ((uint64_t)cum[ti] + x % fs);
            if (interval && i && i % interval == 0) {
                if (ncp >= rows) { status = 3; break; }
                uint64_t *row = cp + ncp * (3 + N);
                row[0] = (uint64_t)i;
                row[1] = (uint64_t)nw;
                row[2] = 0;
                for (int k = 0; k < N; k++) row[3 + k] = xs[k];
                ncp++;
            }
            lane = lane ? lane - 1 : N - 1;
        }
        if (!status) {
            if (N == 1) {
                uint64_t x = xs[0];
                while (x) {
                    if (nw >= cap) { status = 3; break; }
                    word_put(o, isz, nw++, x & wmask);
                    x = uW >= 64 ? 0 : x >> uW;
                }
            } else {
                int64_t per = (S + W - 1) / W;
                for (int k = (int)N - 1; k >= 0 && !status; k--) {
                    uint64_t x = xs[k];
                    for (int64_t j = 0; j < per; j++) {
                        if (nw >= cap) { status = 3; break; }
                        word_put(o, isz, nw++, x & wmask);
                        x >>= uW;
                    }
                }
            }
        }
        Py_END_ALLOW_THREADS
        res = Py_BuildValue("LLL", (long long)status, (long long)(status == 1 ? bad : nw), (long long)ncp);
        goto out;
    badtab:
        PyErr_SetString(PyExc_ValueError, "rans_encode: table outside its limits");
    }
out:
    rel(&s); rel(&e); rel(&rt); rel(&re); rel(&f); rel(&c); rel(&ns); rel(&kb); rel(&nc); rel(&cb); rel(&out);
    rel(&cps);
    return res;
}

/* ---------------------------------------------------------------------------------------------- */
/* join(s, e, direct_exp, esc_exp, n_direct, w, m, top, z_row, per_row, start, out) -> -1 or the first
 * pair whose escape index is outside its group (or whose symbol is outside the code table):
 * decoded pairs -> value bit patterns (out item size 1, 2, 4 or 8), the additional data first
 * shifted left by its row's z (z_row: u8 per row, empty for none; pair j of the tensor is in row
 * (start + j) / per_row). What CodeTable.from_symbols + IeeeFloatPairs.join compute. */
static PyObject *py_join(PyObject *self, PyObject *args) {
    PyObject *os_, *oe_, *od, *oes, *oz, *oout;
    long long n_direct, w_, m_, top_, per_row, start;
    if (!PyArg_ParseTuple(args, "OOOOLLLLOLLO", &os_, &oe_, &od, &oes, &n_direct, &w_, &m_, &top_, &oz, &per_row,
                          &start, &oout))
        return NULL;
    Buf s = {0}, e = {0}, d = {0}, es = {0}, z = {0}, out = {0};
    PyObject *res = NULL;
    if (get_buf(os_, &s, 0, 0, "s") || get_buf(oe_, &e, 0, 0, "e") || get_buf(od, &d, 0, 8, "direct") ||
        get_buf(oes, &es, 0, 8, "esc") || get_buf(oz, &z, 0, 1, "z_row") || get_buf(oout, &out, 1, 0, "out"))
        goto out;
    {
        int64_t n = NITEMS(s), nz = NITEMS(z), nd = NITEMS(d), ne = NITEMS(es);
        int ss = (int)s.view.itemsize, esz = (int)e.view.itemsize, osz = (int)out.view.itemsize;
        if ((ss != 1 && ss != 8) || (esz != 4 && esz != 8) || (osz != 1 && osz != 2 && osz != 4 && osz != 8) ||
            NITEMS(e) != n || NITEMS(out) != n || n_direct < 0 || n_direct > nd || w_ < 0 || w_ > 63 || m_ < 0 ||
            m_ > w_ || top_ < 0 || top_ > 63 || (nz && per_row < 1) || start < 0) {
            PyErr_SetString(PyExc_ValueError, "join: inconsistent arguments");
            goto out;
        }
        const uint8_t *zr = (const uint8_t *)z.view.buf;
        const int64_t *dx = (const int64_t *)d.view.buf, *ex = (const int64_t *)es.view.buf;
        const unsigned w = (unsigned)w_, m = (unsigned)m_, top = (unsigned)top_;
        const uint64_t wmask = lowmask(w), mmask = lowmask(m);
        int64_t bad = -1;
        Py_BEGIN_ALLOW_THREADS
        for (int64_t i = 0; i < n; i++) {
            int64_t sym = ss == 1 ? ((const uint8_t *)s.view.buf)[i] : ((const int64_t *)s.view.buf)[i];
            uint64_t x = esz == 4 ? ((const uint32_t *)e.view.buf)[i] : ((const uint64_t *)e.view.buf)[i];
            if (nz) {
                int64_t row = (start + i) / per_row;
                if (row >= nz) { bad = i; break; }
                unsigned zz = zr[row];
                x = zz >= 64 ? 0 : x << zz;
            }
            uint64_t hi;
            if (sym >= 0 && sym < n_direct) hi = (uint64_t)dx[sym];
            else { /* the escape symbol (as the numba kernel: any symbol from n_direct on) */
                uint64_t idx = w >= 64 ? 0 : x >> w;
                if (sym < 0 || idx >= (uint64_t)ne) { bad = i; break; }
                hi = (uint64_t)ex[idx];
                x &= wmask;
            }
            uint64_t v = ((x >> m) << top) | (hi << m) | (x & mmask);
            switch (osz) {
            case 1: ((uint8_t *)out.view.buf)[i] = (uint8_t)v; break;
            case 2: ((uint16_t *)out.view.buf)[i] = (uint16_t)v; break;
            case 4: ((uint32_t *)out.view.buf)[i] = (uint32_t)v; break;
            default: ((uint64_t *)out.view.buf)[i] = v;
            }
        }
        Py_END_ALLOW_THREADS
        res = PyLong_FromLongLong(bad);
    }
out:
    rel(&s); rel(&e); rel(&d); rel(&es); rel(&z); rel(&out);
    return res;
}

/* ---------------------------------------------------------------------------------------------- */
/* stationary(lo (int64 [L]), hi (int64 [L]), weight (float64 [L]), max_iter, tol) -> float64 [L]: the
 * power iteration of tans.stationary, operation for operation as NumPy does it (the prefix sum in state
 * order, then per state weight * (prefix[hi] - prefix[lo]), the lazy step 0.5 * (that + pi); stop when
 * max |new - pi| < tol), so the result is bit-identical. */
/* stationary_many(lo, hi, weight (K x L each), K, max_iter, tol) -> bytes of K x L doubles: the tANS
 * encoder's stationary state distribution (tans.py: stationary, whose NumPy loop this is, operation for
 * operation) of K tables of one size at once (a tensor's candidate spreads; K = 1 for one table), each
 * with its own operations in its own order and its own stop, so each result is the one it gets alone.
 * Why K at once: a step is two chains of L dependent operations (the prefix sum's adds, the largest
 * change's compares), and two tables' steps side by side overlap them: MiniLM's 103 pairs of candidate
 * tables 25 -> 20 ms. Four prefix chains at once, or a vectorized update, gained nothing more. */
#define STAT_KMAX 8
static PyObject *py_stationary_many(PyObject *self, PyObject *args) {
    PyObject *olo, *ohi, *ow;
    long long max_iter, K;
    double tol;
    if (!PyArg_ParseTuple(args, "OOOLLd", &olo, &ohi, &ow, &K, &max_iter, &tol)) return NULL;
    Buf lb = {0}, hb = {0}, wb = {0};
    PyObject *res = NULL;
    double *pi = NULL, *nw = NULL, *prefix = NULL;
    if (get_buf(olo, &lb, 0, 8, "lo") || get_buf(ohi, &hb, 0, 8, "hi") || get_buf(ow, &wb, 0, 8, "weight")) goto out;
    {
        int64_t total = NITEMS(lb), L = K > 0 ? total / K : 0;
        if (K < 1 || K > STAT_KMAX || L < 1 || L > (1 << 16) || L * K != total || NITEMS(hb) != total ||
            NITEMS(wb) != total) {
            PyErr_SetString(PyExc_ValueError, "stationary_many: inconsistent arguments");
            goto out;
        }
        const int64_t *lo = (const int64_t *)lb.view.buf, *hi = (const int64_t *)hb.view.buf;
        const double *w = (const double *)wb.view.buf;
        for (int64_t y = 0; y < total; y++)
            if (lo[y] < 0 || lo[y] > hi[y] || hi[y] > L) {
                PyErr_SetString(PyExc_ValueError, "stationary_many: a block outside the table");
                goto out;
            }
        pi = (double *)malloc((size_t)total * sizeof(double));
        nw = (double *)malloc((size_t)total * sizeof(double));
        prefix = (double *)malloc((size_t)(K * (L + 1)) * sizeof(double));
        if (!pi || !nw || !prefix) { PyErr_NoMemory(); goto out; }
        for (int64_t x = 0; x < total; x++) pi[x] = 1.0 / (double)L;
        Py_BEGIN_ALLOW_THREADS
        int64_t act[STAT_KMAX], na = max_iter > 0 ? K : 0;
        int64_t it_of[STAT_KMAX];
        for (int64_t k = 0; k < K; k++) {
            act[k] = k;
            it_of[k] = 0;
            prefix[k * (L + 1)] = 0.0;
        }
        /* pi and nw swap per table; which buffer holds table k's current pi is it_of[k] % 2 */
        while (na > 0) {
            const double *pa[STAT_KMAX];
            double *qa[STAT_KMAX];
            for (int64_t a = 0; a < na; a++) {
                int64_t k = act[a];
                pa[a] = (it_of[k] & 1 ? nw : pi) + k * L;
                qa[a] = prefix + k * (L + 1);
            }
            /* the prefix sums, two tables' chains at a time (each its own adds in its own order) */
            int64_t a = 0;
            for (; a + 1 < na; a += 2) {
                const double *p0 = pa[a], *p1 = pa[a + 1];
                double *r0 = qa[a], *r1 = qa[a + 1];
                double s0 = p0[0], s1 = p1[0];
                r0[1] = s0;
                r1[1] = s1;
                for (int64_t x = 1; x < L; x++) {
                    s0 = s0 + p0[x];
                    s1 = s1 + p1[x];
                    r0[x + 1] = s0;
                    r1[x + 1] = s1;
                }
            }
            if (a < na) {
                const double *p0 = pa[a];
                double *r0 = qa[a];
                double s0 = p0[0];
                r0[1] = s0;
                for (int64_t x = 1; x < L; x++) {
                    s0 = s0 + p0[x];
                    r0[x + 1] = s0;
                }
            }
            int64_t keep = 0;
            for (int64_t a = 0; a < na; a++) {
                int64_t k = act[a];
                const double *p = (it_of[k] & 1 ? nw : pi) + k * L;
                double *q = (it_of[k] & 1 ? pi : nw) + k * L;
                const double *pre = prefix + k * (L + 1), *wk = w + k * L;
                const int64_t *lk = lo + k * L, *hk = hi + k * L;
                double diff = 0.0;
                for (int64_t y = 0; y < L; y++) {
                    double v = 0.5 * (wk[y] * (pre[hk[y]] - pre[lk[y]]) + p[y]);
                    double d = fabs(v - p[y]);
                    if (d > diff) diff = d;
                    q[y] = v;
                }
                it_of[k]++;
                if (!(diff < tol) && it_of[k] < max_iter) act[keep++] = k;
            }
            na = keep;
        }
        /* table k's result is in the buffer written last: nw after an odd number of steps */
        for (int64_t k = 0; k < K; k++)
            if (it_of[k] & 1) memcpy(pi + k * L, nw + k * L, (size_t)L * sizeof(double));
        Py_END_ALLOW_THREADS
        res = PyBytes_FromStringAndSize((const char *)pi, (Py_ssize_t)(total * sizeof(double)));
    }
out:
    free(pi); free(nw); free(prefix);
    rel(&lb); rel(&hb); rel(&wb);
    return res;
}

/* ---------------------------------------------------------------------------------------------- */
/* DFloat11-style Huffman of bf16 exponents (huffman.py is the golden model and the format's
 * description): a peer the benchmarks time beside the ANS kernels, not a project bitstream.
 * Canonical codes of at most 32 bits, assigned in order of (length, exponent); the payload is MSB
 * first; one raw byte per weight holds sign << 7 | mantissa. */

#define HUFF_MAXLEN 32
#define HUFF_LUT 12

typedef struct {
    uint16_t lut[1 << HUFF_LUT]; /* symbol << 8 | length for codes <= HUFF_LUT bits; 0: longer or none */
    uint64_t first[HUFF_MAXLEN + 1]; /* canonical first code of each length */
    uint32_t cnt[HUFF_MAXLEN + 1], idx[HUFF_MAXLEN + 1];
    uint8_t sorted[256];
    int maxlen;
} HuffTable;

/* 0, or -1 when the lengths are no prefix code (Kraft sum above 1) or out of range */
static int huff_build(const uint8_t *lens, HuffTable *t) {
    memset(t, 0, sizeof *t);
    uint32_t nsym = 0;
    for (int s = 0; s < 256; s++) {
        if (lens[s] > HUFF_MAXLEN) return -1;
        if (lens[s]) { t->cnt[lens[s]]++; nsym++; if (lens[s] > t->maxlen) t->maxlen = lens[s]; }
    }
    uint64_t code = 0;
    uint32_t k = 0;
    for (int L = 1; L <= HUFF_MAXLEN; L++) {
        code <<= 1;
        t->first[L] = code;
        t->idx[L] = k;
        code += t->cnt[L];
        k += t->cnt[L];
        if (code > ((uint64_t)1 << L)) return -1;
    }
    uint32_t fill[HUFF_MAXLEN + 1];
    for (int L = 0; L <= HUFF_MAXLEN; L++) fill[L] = t->idx[L];
    for (int s = 0; s < 256; s++)
        if (lens[s]) t->sorted[fill[lens[s]]++] = (uint8_t)s;
    for (int L = 1; L <= HUFF_LUT; L++)
        for (uint32_t j = 0; j < t->cnt[L]; j++) {
            uint32_t c = (uint32_t)(t->first[L] + j), sh = HUFF_LUT - L;
            uint16_t e = (uint16_t)((t->sorted[t->idx[L] + j] << 8) | L);
            for (uint32_t a = c << sh; a < ((c + 1) << sh); a++) t->lut[a] = e;
        }
    (void)nsym;
    return 0;
}

INLINE uint64_t load64_be(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
#if !(defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__)
    v = __builtin_bswap64(v);
#endif
    return v;
}

/* bits [B, B + 57) MSB first, left-aligned (bits past the end read as 0) */
INLINE uint64_t window_be(const uint8_t *p, int64_t nbytes, int64_t B) {
    int64_t off = B >> 3;
    if (LIKELY(off + 8 <= nbytes)) return load64_be(p + off) << (B & 7);
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        if (off + i < nbytes) v |= (uint64_t)p[off + i] << (56 - 8 * i);
    return v << (B & 7);
}

/* huff_decode_bf16(payload, nbits, raw u8[n], lens u8[256], out u16[n]) -> -1 when every weight
 * decoded and exactly nbits were read, -2 when bits are left over, else the first weight whose code
 * is missing or runs past nbits. */
static PyObject *py_huff_decode_bf16(PyObject *self, PyObject *args) {
    PyObject *opl, *oraw, *olen, *oout;
    long long nbits;
    if (!PyArg_ParseTuple(args, "OLOOO", &opl, &nbits, &oraw, &olen, &oout)) return NULL;
    Buf pl = {0}, raw = {0}, ln = {0}, out = {0};
    PyObject *res = NULL;
    HuffTable *t = NULL;
    if (get_buf(opl, &pl, 0, 1, "payload") || get_buf(oraw, &raw, 0, 1, "raw") || get_buf(olen, &ln, 0, 1, "lens") ||
        get_buf(oout, &out, 1, 2, "out"))
        goto out;
    {
        int64_t n = NITEMS(raw), nbytes = pl.view.len;
        if (NITEMS(ln) != 256 || NITEMS(out) != n || nbits < 0 || nbits > 8 * nbytes) {
            PyErr_SetString(PyExc_ValueError, "huff_decode_bf16: inconsistent arguments");
            goto out;
        }
        t = (HuffTable *)malloc(sizeof *t);
        if (!t) { PyErr_NoMemory(); goto out; }
        if (huff_build((const uint8_t *)ln.view.buf, t)) {
            PyErr_SetString(PyExc_ValueError, "huff_decode_bf16: the code lengths are no prefix code");
            goto out;
        }
        const uint8_t *p = (const uint8_t *)pl.view.buf, *r = (const uint8_t *)raw.view.buf;
        uint16_t *o = (uint16_t *)out.view.buf;
        int64_t B = 0, bad = -1;
        const int maxlen = t->maxlen;
        Py_BEGIN_ALLOW_THREADS
        /* One load serves two codes when the first is at most 25 bits (a load gives 57 valid bits and
         * a code is at most 32), which takes a memory load off every other step of the chain. */
#define HUFF_ONE(v, sym, L)                                                                       \
        do {                                                                                      \
            uint32_t ent_ = t->lut[(v) >> (64 - HUFF_LUT)];                                       \
            if (LIKELY(ent_)) { sym = ent_ >> 8; L = ent_ & 0xFF; }                               \
            else {                                                                                \
                for (L = HUFF_LUT + 1; (int)L <= maxlen; L++)                                     \
                    if (((v) >> (64 - L)) - t->first[L] < t->cnt[L]) break;                       \
                if ((int)L > maxlen) { sym = 0; L = 0; }                                          \
                else sym = t->sorted[t->idx[L] + (((v) >> (64 - L)) - t->first[L])];              \
            }                                                                                     \
        } while (0)
        int64_t i = 0;
        while (i < n) {
            uint64_t v = window_be(p, nbytes, B);
            uint32_t sym, L;
            HUFF_ONE(v, sym, L);
            if (UNLIKELY(!L) || UNLIKELY(B + L > nbits)) { bad = i; break; }
            B += L;
            uint32_t rb = r[i];
            o[i] = (uint16_t)(((rb & 0x80u) << 8) | (sym << 7) | (rb & 0x7Fu));
            i++;
            if (L <= 25 && i < n) {
                v <<= L;
                HUFF_ONE(v, sym, L);
                if (UNLIKELY(!L) || UNLIKELY(B + L > nbits)) { bad = i; break; }
                B += L;
                rb = r[i];
                o[i] = (uint16_t)(((rb & 0x80u) << 8) | (sym << 7) | (rb & 0x7Fu));
                i++;
            }
        }
#undef HUFF_ONE
        if (bad < 0 && B != nbits) bad = -2;
        Py_END_ALLOW_THREADS
        res = PyLong_FromLongLong(bad);
    }
out:
    free(t);
    rel(&pl); rel(&raw); rel(&ln); rel(&out);
    return res;
}

/* huff_encode_bf16(values u16[n], codes u32[256], lens u8[256], payload u8 (room for every code
 * plus 8 bytes), raw u8[n]) -> the payload's length in bits, or -(i + 1) when weight i's exponent
 * has no code. */
static PyObject *py_huff_encode_bf16(PyObject *self, PyObject *args) {
    PyObject *ov, *oc, *olen, *opl, *oraw;
    if (!PyArg_ParseTuple(args, "OOOOO", &ov, &oc, &olen, &opl, &oraw)) return NULL;
    Buf v = {0}, cd = {0}, ln = {0}, pl = {0}, raw = {0};
    PyObject *res = NULL;
    if (get_buf(ov, &v, 0, 2, "values") || get_buf(oc, &cd, 0, 4, "codes") || get_buf(olen, &ln, 0, 1, "lens") ||
        get_buf(opl, &pl, 1, 1, "payload") || get_buf(oraw, &raw, 1, 1, "raw"))
        goto out;
    {
        int64_t n = NITEMS(v);
        const uint8_t *lens = (const uint8_t *)ln.view.buf;
        const uint32_t *codes = (const uint32_t *)cd.view.buf;
        int maxlen = 0;
        for (int s = 0; NITEMS(ln) == 256 && s < 256; s++) if (lens[s] > maxlen) maxlen = lens[s];
        if (NITEMS(cd) != 256 || NITEMS(ln) != 256 || NITEMS(raw) != n || maxlen > HUFF_MAXLEN ||
            pl.view.len < (n * maxlen) / 8 + 16) {
            PyErr_SetString(PyExc_ValueError, "huff_encode_bf16: inconsistent arguments");
            goto out;
        }
        const uint16_t *x = (const uint16_t *)v.view.buf;
        uint8_t *p = (uint8_t *)pl.view.buf, *r = (uint8_t *)raw.view.buf;
        uint64_t acc = 0;
        int64_t nacc = 0, written = 0, bad = 0;
        Py_BEGIN_ALLOW_THREADS
        for (int64_t i = 0; i < n; i++) {
            uint32_t w = x[i], e = (w >> 7) & 0xFF, L = lens[e];
            r[i] = (uint8_t)(((w >> 8) & 0x80u) | (w & 0x7Fu));
            if (UNLIKELY(!L)) { bad = -(i + 1); break; }
            acc = (acc << L) | codes[e];
            nacc += L;
            if (nacc >= 32) { /* the 32 oldest pending bits, big-endian */
                nacc -= 32;
                uint32_t word = (uint32_t)(acc >> nacc);
#if !(defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__)
                word = __builtin_bswap32(word);
#endif
                memcpy(p + written, &word, 4);
                written += 4;
            }
        }
        if (!bad) {
            for (; nacc > 0; nacc -= 8) /* the last bits, left-aligned and zero-padded */
                p[written++] = (uint8_t)(nacc >= 8 ? acc >> (nacc - 8) : acc << (8 - nacc));
            bad = 8 * written + nacc; /* nacc <= 0 here: the padding */
        }
        Py_END_ALLOW_THREADS
        res = PyLong_FromLongLong(bad);
    }
out:
    rel(&v); rel(&cd); rel(&ln); rel(&pl); rel(&raw);
    return res;
}

/* ---------------------------------------------------------------------------------------------- */
/* Splitting values into coding pairs (what IeeeFloatPairs.split computes in NumPy, in two passes
 * without temporaries: compress spends most of its time outside the coder otherwise). */

/* field_hist(x (u8/u16/u32/u64), shift, mask, hist (int64, > mask entries)) -> None: adds the
 * occurrences of (x >> shift) & mask to hist. Four sub-histograms, so that runs of one value (an
 * exponent repeats most of the time) do not serialize on one counter. */
static PyObject *py_field_hist(PyObject *self, PyObject *args) {
    PyObject *ox, *oh;
    long long shift, mask;
    if (!PyArg_ParseTuple(args, "OLLO", &ox, &shift, &mask, &oh)) return NULL;
    Buf x = {0}, h = {0};
    PyObject *res = NULL;
    int64_t *sub = NULL;
    if (get_buf(ox, &x, 0, 0, "x") || get_buf(oh, &h, 1, 8, "hist")) goto out;
    {
        int64_t n = NITEMS(x), nh = NITEMS(h);
        int isz = (int)x.view.itemsize;
        if ((isz != 1 && isz != 2 && isz != 4 && isz != 8) || shift < 0 || shift > 63 || mask < 0 ||
            mask > 0xFFFF || nh <= mask) {
            PyErr_SetString(PyExc_ValueError, "field_hist: inconsistent arguments");
            goto out;
        }
        const int64_t nb = mask + 1;
        sub = (int64_t *)calloc((size_t)(4 * nb), sizeof(int64_t));
        if (!sub) { PyErr_NoMemory(); goto out; }
        const unsigned sh = (unsigned)shift;
        const uint64_t mk = (uint64_t)mask;
        const void *p = x.view.buf;
        int64_t *hist = (int64_t *)h.view.buf;
        Py_BEGIN_ALLOW_THREADS
#define FIELD_HIST_LOOP(T)                                                                      \
        {                                                                                       \
            const T *q = (const T *)p;                                                          \
            int64_t i = 0;                                                                      \
            for (; i + 4 <= n; i += 4) {                                                        \
                sub[((uint64_t)q[i] >> sh) & mk]++;                                             \
                sub[nb + (((uint64_t)q[i + 1] >> sh) & mk)]++;                                  \
                sub[2 * nb + (((uint64_t)q[i + 2] >> sh) & mk)]++;                              \
                sub[3 * nb + (((uint64_t)q[i + 3] >> sh) & mk)]++;                              \
            }                                                                                   \
            for (; i < n; i++) sub[((uint64_t)q[i] >> sh) & mk]++;                              \
        }
        if (isz == 1 && sh == 0 && mk == 0xff) {
            /* a tensor's codes (bytes): skewed, a few values take most of them, so an increment
             * waits on the store of the last one to its counter. Eight 32-bit histograms (8 KB),
             * eight bytes a load, keep eight of those chains apart; they are emptied into the 64-bit
             * counts every 2^31 bytes, before a counter could wrap. */
            uint32_t h8[8][256];
            const uint8_t *q = (const uint8_t *)p;
            for (int64_t at = 0; at < n;) {
                int64_t end = n - at > ((int64_t)1 << 31) ? at + ((int64_t)1 << 31) : n;
                memset(h8, 0, sizeof h8);
                int64_t i = at;
                for (; i + 8 <= end; i += 8) {
                    uint64_t v = load64_le(q + i);
                    h8[0][v & 0xff]++;
                    h8[1][(v >> 8) & 0xff]++;
                    h8[2][(v >> 16) & 0xff]++;
                    h8[3][(v >> 24) & 0xff]++;
                    h8[4][(v >> 32) & 0xff]++;
                    h8[5][(v >> 40) & 0xff]++;
                    h8[6][(v >> 48) & 0xff]++;
                    h8[7][v >> 56]++;
                }
                for (; i < end; i++) h8[0][q[i]]++;
                for (int v = 0; v < 256; v++)
                    for (int j = 0; j < 8; j++) sub[v] += h8[j][v];
                at = end;
            }
        } else {
            switch (isz) {
            case 1: FIELD_HIST_LOOP(uint8_t) break;
            case 2: FIELD_HIST_LOOP(uint16_t) break;
            case 4: FIELD_HIST_LOOP(uint32_t) break;
            default: FIELD_HIST_LOOP(uint64_t)
            }
        }
#undef FIELD_HIST_LOOP
        for (int64_t v = 0; v < nb; v++) hist[v] += sub[v] + sub[nb + v] + sub[2 * nb + v] + sub[3 * nb + v];
        Py_END_ALLOW_THREADS
        Py_INCREF(Py_None);
        res = Py_None;
    }
out:
    free(sub);
    rel(&x); rel(&h);
    return res;
}

/* split_pairs(bits (u16/u32), m, total, lut (u8 [> exponent field mask]), codes (u8 out), extra (out,
 * item size of bits)) -> None: per value, code = lut[exponent field] and extra = sign << m |
 * mantissa, for an IEEE-style format of `total` bits with m mantissa bits (IeeeFloatPairs.split). */
static PyObject *py_split_pairs(PyObject *self, PyObject *args) {
    PyObject *ob, *ol, *oc, *oe;
    long long m_, total_;
    if (!PyArg_ParseTuple(args, "OLLOOO", &ob, &m_, &total_, &ol, &oc, &oe)) return NULL;
    Buf b = {0}, l = {0}, c = {0}, e = {0};
    PyObject *res = NULL;
    if (get_buf(ob, &b, 0, 0, "bits") || get_buf(ol, &l, 0, 1, "lut") || get_buf(oc, &c, 1, 1, "codes") ||
        get_buf(oe, &e, 1, 0, "extra"))
        goto out;
    {
        int64_t n = NITEMS(b);
        int isz = (int)b.view.itemsize;
        if ((isz != 2 && isz != 4) || e.view.itemsize != isz || NITEMS(c) != n || NITEMS(e) != n || m_ < 0 ||
            total_ < m_ + 2 || total_ > 8 * isz || NITEMS(l) < ((int64_t)1 << (total_ - 1 - m_))) {
            PyErr_SetString(PyExc_ValueError, "split_pairs: inconsistent arguments");
            goto out;
        }
        const unsigned m = (unsigned)m_, top = (unsigned)total_ - 1;
        const uint32_t emask = (uint32_t)lowmask(top - m), mmask = (uint32_t)lowmask(m);
        const uint8_t *lut = (const uint8_t *)l.view.buf;
        uint8_t *codes = (uint8_t *)c.view.buf;
        Py_BEGIN_ALLOW_THREADS
        if (isz == 2) {
            const uint16_t *q = (const uint16_t *)b.view.buf;
            uint16_t *ex = (uint16_t *)e.view.buf;
            for (int64_t i = 0; i < n; i++) {
                uint32_t v = q[i];
                codes[i] = lut[(v >> m) & emask];
                ex[i] = (uint16_t)(((v >> top) << m) | (v & mmask));
            }
        } else {
            const uint32_t *q = (const uint32_t *)b.view.buf;
            uint32_t *ex = (uint32_t *)e.view.buf;
            for (int64_t i = 0; i < n; i++) {
                uint32_t v = q[i];
                codes[i] = lut[(v >> m) & emask];
                ex[i] = ((v >> top) << m) | (v & mmask);
            }
        }
        Py_END_ALLOW_THREADS
        Py_INCREF(Py_None);
        res = Py_None;
    }
out:
    rel(&b); rel(&l); rel(&c); rel(&e);
    return res;
}

/* One row of map_symbols: symbol and additional data (escape index above the w data bits, shifted right
 * by the row's zz); *missing collects whether a code outside the table (symbol 255) occurred. */
#define MAP_ROW(NAME, T)                                                                                       \
    static void NAME(const uint8_t *cd, const T *ex, const uint8_t *so, const uint32_t *io, unsigned w,      \
                     unsigned zz, uint8_t *s_out, uint32_t *e_out, int64_t len, unsigned *missing) {        \
        unsigned miss = 0;                                                                                   \
        for (int64_t i = 0; i < len; i++) {                                                                  \
            const uint8_t code = cd[i], sym = so[code];                                                      \
            miss |= sym == 255;                                                                              \
            s_out[i] = sym;                                                                                  \
            e_out[i] = ((uint32_t)ex[i] | io[code] << w) >> zz;                                              \
        }                                                                                                    \
        *missing |= miss;                                                                                    \
    }
MAP_ROW(map_row_u16, uint16_t)
MAP_ROW(map_row_u32, uint32_t)

#ifdef HAVE_PDEP
/* map_row_u16/u32 with AVX-512 VBMI, 64 pairs a step: the symbol and the escape index (a byte: at most 255
 * escaped codes) of each code looked up in 256-byte tables by two two-table byte permutes and a blend on
 * the code's top bit, the additional data widened to 32 bits, the index shifted above it and the row's zz
 * shifted out; the last len % 64 pairs by the scalar loop. Bit for bit what the scalar loop writes (the
 * tests compare them at every tail length). */
#define MAP_ROW_SIMD(NAME, T, SCALAR)                                                                          \
    SIMD_ATTR static void NAME(const uint8_t *cd, const T *ex, const uint8_t *so, const uint8_t *io8,          \
                               const uint32_t *io, unsigned w, unsigned zz, uint8_t *s_out, uint32_t *e_out,   \
                               int64_t len, unsigned *missing) {                                               \
        const __m512i s0 = _mm512_loadu_si512(so), s1 = _mm512_loadu_si512(so + 64),                         \
                      s2 = _mm512_loadu_si512(so + 128), s3 = _mm512_loadu_si512(so + 192);                   \
        const __m512i i0 = _mm512_loadu_si512(io8), i1 = _mm512_loadu_si512(io8 + 64),                        \
                      i2 = _mm512_loadu_si512(io8 + 128), i3 = _mm512_loadu_si512(io8 + 192);                 \
        const __m512i all = _mm512_set1_epi8((char)255);                                                     \
        const __m128i wc = _mm_cvtsi32_si128((int)w), zc = _mm_cvtsi32_si128((int)zz);                       \
        __mmask64 miss = 0;                                                                                    \
        int64_t i = 0;                                                                                         \
        for (; i + 64 <= len; i += 64) {                                                                       \
            const __m512i c = _mm512_loadu_si512(cd + i);                                                      \
            const __mmask64 top = _mm512_movepi8_mask(c);                                                      \
            const __m512i sym = _mm512_mask_blend_epi8(top, _mm512_permutex2var_epi8(s0, c, s1),               \
                                                       _mm512_permutex2var_epi8(s2, c, s3));                   \
            const __m512i idx = _mm512_mask_blend_epi8(top, _mm512_permutex2var_epi8(i0, c, i1),               \
                                                       _mm512_permutex2var_epi8(i2, c, i3));                   \
            miss |= _mm512_cmpeq_epi8_mask(sym, all);                                                          \
            _mm512_storeu_si512(s_out + i, sym);                                                               \
            MAP_QUARTER(T, 0) MAP_QUARTER(T, 1) MAP_QUARTER(T, 2) MAP_QUARTER(T, 3)                            \
        }                                                                                                      \
        *missing |= miss != 0;                                                                                 \
        SCALAR(cd + i, ex + i, so, io, w, zz, s_out + i, e_out + i, len - i, missing);                         \
    }
/* pairs 16q .. 16q + 15 of the step: their additional data (escape index above it, zz shifted out) */
#define MAP_QUARTER(T, q)                                                                                      \
    _mm512_storeu_si512(e_out + i + 16 * q,                                                                    \
                        _mm512_srl_epi32(_mm512_or_si512(WIDEN_##T(ex + i + 16 * q),                           \
                                                         _mm512_sll_epi32(_mm512_cvtepu8_epi32(                \
                                                             _mm512_extracti32x4_epi32(idx, q)), wc)), zc));
#define WIDEN_uint16_t(p) _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(p)))
#define WIDEN_uint32_t(p) _mm512_loadu_si512(p)
MAP_ROW_SIMD(map_row_u16_vbmi, uint16_t, map_row_u16)
MAP_ROW_SIMD(map_row_u32_vbmi, uint32_t, map_row_u32)
#endif

static void map_row_zero(const uint8_t *cd, const uint8_t *so, uint8_t *s_out, uint32_t *e_out, int64_t len,
                         unsigned *missing) {
    unsigned miss = 0;
    for (int64_t i = 0; i < len; i++) {
        const uint8_t sym = so[cd[i]];
        miss |= sym == 255;
        s_out[i] = sym;
        e_out[i] = 0;
    }
    *missing |= miss;
}

/* map_symbols(codes (u8), extra (u16/u32), sym_of (u8 [256]), idx_of (u32 [256]), w, z_row (u8 per row,
 * empty for none), per_row, out_s (u8), out_e (u32)) -> -1 or the first pair whose code has no symbol
 * (sym_of 255): CodeTable.to_symbols (symbol = sym_of[code], additional data | escape index << w)
 * followed by the row shift of row_shifts (additional data >> its row's z), into the caller's
 * slices of the stream's arrays. */
static PyObject *py_map_symbols(PyObject *self, PyObject *args) {
    PyObject *oc, *oe, *os_, *oi, *oz, *oos, *ooe;
    long long w_, per_row;
    if (!PyArg_ParseTuple(args, "OOOOLOLOO", &oc, &oe, &os_, &oi, &w_, &oz, &per_row, &oos, &ooe)) return NULL;
    Buf c = {0}, e = {0}, sy = {0}, ix = {0}, z = {0}, outs = {0}, oute = {0};
    PyObject *res = NULL;
    if (get_buf(oc, &c, 0, 1, "codes") || get_buf(oe, &e, 0, 0, "extra") || get_buf(os_, &sy, 0, 1, "sym_of") ||
        get_buf(oi, &ix, 0, 4, "idx_of") || get_buf(oz, &z, 0, 1, "z_row") || get_buf(oos, &outs, 1, 1, "out_s") ||
        get_buf(ooe, &oute, 1, 4, "out_e"))
        goto out;
    {
        int64_t n = NITEMS(c), nz = NITEMS(z);
        int esz = (int)e.view.itemsize;
        if ((esz != 2 && esz != 4) || NITEMS(e) != n || NITEMS(outs) != n || NITEMS(oute) != n ||
            NITEMS(sy) != 256 || NITEMS(ix) != 256 || w_ < 0 || w_ > 31 || (nz && (per_row < 1 || nz * per_row != n))) {
            PyErr_SetString(PyExc_ValueError, "map_symbols: inconsistent arguments");
            goto out;
        }
        const uint8_t *cd = (const uint8_t *)c.view.buf, *so = (const uint8_t *)sy.view.buf;
        const uint8_t *zr = (const uint8_t *)z.view.buf;
        const uint32_t *io = (const uint32_t *)ix.view.buf;
        uint8_t *s_out = (uint8_t *)outs.view.buf;
        uint32_t *e_out = (uint32_t *)oute.view.buf;
        const unsigned w = (unsigned)w_;
        int64_t bad = -1;
        /* the VBMI rows look the escape index up as a byte */
        uint8_t io8[256];
        int vbmi = use_simd;
        for (int k = 0; k < 256; k++) {
            io8[k] = (uint8_t)io[k];
            if (io[k] > 255) vbmi = 0;
        }
        (void)io8;
        Py_BEGIN_ALLOW_THREADS
        int64_t rows = nz ? nz : 1, len = nz ? per_row : n;
        for (int64_t r = 0; r < rows && bad < 0; r++) {
            const unsigned zz = nz ? zr[r] : 0;
            const int64_t lo = r * len;
            /* No exit inside the loops (a code outside the table is rare: it is looked for after a row
             * that had one), so they run at the loads' and stores' pace. */
            unsigned missing = 0;
            if (zz >= 32)
                map_row_zero(cd + lo, so, s_out + lo, e_out + lo, len, &missing);
#ifdef HAVE_PDEP
            else if (vbmi && esz == 2)
                map_row_u16_vbmi(cd + lo, (const uint16_t *)e.view.buf + lo, so, io8, io, w, zz, s_out + lo,
                                 e_out + lo, len, &missing);
            else if (vbmi)
                map_row_u32_vbmi(cd + lo, (const uint32_t *)e.view.buf + lo, so, io8, io, w, zz, s_out + lo,
                                 e_out + lo, len, &missing);
#endif
            else if (esz == 2)
                map_row_u16(cd + lo, (const uint16_t *)e.view.buf + lo, so, io, w, zz, s_out + lo, e_out + lo, len,
                            &missing);
            else
                map_row_u32(cd + lo, (const uint32_t *)e.view.buf + lo, so, io, w, zz, s_out + lo, e_out + lo, len,
                            &missing);
            if (UNLIKELY(missing))
                for (int64_t i = lo; i < lo + len; i++)
                    if (so[cd[i]] == 255) { bad = i; break; }
        }
        Py_END_ALLOW_THREADS
        res = PyLong_FromLongLong(bad);
    }
out:
    rel(&c); rel(&e); rel(&sy); rel(&ix); rel(&z); rel(&outs); rel(&oute);
    return res;
}

/* ---------------------------------------------------------------------------------------------- */

static PyMethodDef methods[] = {
    {"stationary_many", py_stationary_many, METH_VARARGS, "the tANS encoder's stationary state distributions of K tables"},
    {"tans_decode", py_tans_decode, METH_VARARGS, "tANS decode of N interleaved states into (symbol, extra) arrays"},
    {"tans_decode_values", py_tans_decode_values, METH_VARARGS, "tANS decode straight into value bit patterns"},
    {"simd", py_simd, METH_VARARGS, "asks or sets whether the SIMD kernels run (-1, 0, 1)"},
    {"simd_level", py_simd_level, METH_VARARGS, "asks (-1) or caps the SIMD level: 0 scalar, 1 AVX2, 2 AVX-512"},
    {"rans16_decode", nas_py_rans16_decode, METH_VARARGS, "rANS decode of rans16xN streams, segments side by side"},
    {"rans16_encode", nas_py_rans16_encode, METH_VARARGS, "rANS encode of rans16xN streams (SIMD across the states)"},
    {"crc32_blocks", nas_py_crc32_blocks, METH_VARARGS, "zlib's CRC-32 of word ranges in decoding order (the block CRC)"},
    {"crc32_path", nas_py_crc32_path, METH_VARARGS, "asks (-1) or sets whether the folded (PCLMULQDQ) CRC runs"},
    {"normalize", nas_py_normalize, METH_VARARGS, "minimum-cost integer frequencies of positive counts (normalize_counts)"},
    {"code_table_search", nas_py_code_table_search, METH_VARARGS, "build_code_table's escape search: direct codes and frequencies"},
    {"tans_heads", py_tans_heads, METH_VARARGS, "the golden stream heads of independent tANS blocks"},
    {"tans_state_at", py_tans_state_at, METH_VARARGS, "the golden decoder's (h, cnt, buf) at a bit position"},
    {"tans_encode", py_tans_encode, METH_VARARGS, "tANS encode of N interleaved states"},
    {"rans_decode", py_rans_decode, METH_VARARGS, "rANS decode of N interleaved states"},
    {"rans_encode", py_rans_encode, METH_VARARGS, "rANS encode of N interleaved states"},
    {"join", py_join, METH_VARARGS, "decoded pairs to value bit patterns (row shifts restored)"},
    {"field_hist", py_field_hist, METH_VARARGS, "adds the histogram of a bit field of unsigned integers"},
    {"map_symbols", py_map_symbols, METH_VARARGS, "coding pairs to a coder's (symbol, additional data), row shifts applied"},
    {"split_pairs", py_split_pairs, METH_VARARGS, "IEEE-style float bit patterns to (code, additional data) pairs"},
    {"huff_decode_bf16", py_huff_decode_bf16, METH_VARARGS, "DFloat11-style Huffman decode of bf16 (a benchmark peer)"},
    {"huff_encode_bf16", py_huff_encode_bf16, METH_VARARGS, "DFloat11-style Huffman encode of bf16 (a benchmark peer)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "nativeans",
                                    "Native tANS/rANS kernels of ansforge (see fastans).", -1, methods};

PyMODINIT_FUNC PyInit_nativeans(void) {
    choose_isa();
    nas_crc_init();
    PyObject *mod = PyModule_Create(&moddef);
    if (mod && (PyModule_AddIntConstant(mod, "uses_pdep", use_pdep) < 0 ||
                PyModule_AddIntConstant(mod, "cpu_simd_level", have_level) < 0 ||
                PyModule_AddIntConstant(mod, "cpu_has_vbmi_kernel", have_simd) < 0 ||
                PyModule_AddIntConstant(mod, "slow_gathers", slow_gathers) < 0)) {
        Py_DECREF(mod);
        return NULL;
    }
    return mod;
}
