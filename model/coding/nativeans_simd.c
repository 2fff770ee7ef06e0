/* SIMD kernels of `ansforge.model.coding.nativeans` (the module itself is nativeans.c).
 *
 * - The rANS coders of the interleaved preset (`rans16xN`: S = 32, W = 16, P = 16, docs/bitstream.md §4
 *   and §8), decode and encode, as pairs or straight into value bit patterns; for N = 16 the 16 states
 *   are the 16 lanes of one AVX-512 register. A scalar kernel for the same preset (any N) does the
 *   rest: the pairs a block cannot take (a run's or a segment's edges, the bottom of the stream,
 *   tables whose symbols carry more than one chunk of additional data), and everything where the CPU
 *   has no AVX-512 or `simd_level(0)` forces it (tests compare the two, bit for bit).
 * - The AVX-512 encoder of tANS with N = 16 states (nas_avx512_tans_enc16): the 16 states in one register,
 *   the pairs' bits into nativeans.c's accumulator, for the groups of 16 pairs its scalar kernel would code.
 * - The AVX2 values decoder of tANS with N = 16 states and 16-bit values (nas_avx2_val16), for CPUs
 *   without the AVX-512 VBMI kernel of nativeans.c, and the AVX-512 F/BW one (nas_avx512_val16: tables
 *   looked up with register permutes, no gathers, L <= 256) for AVX-512 CPUs without VBMI.
 *
 * Every vector function has its own target attribute (no -march: the wheel runs on any x86-64); the
 * callers pick them at run time by CPU features (nas_level, chosen once at import in nativeans.c).
 */
#include "nativeans.h"

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__) && !defined(NAS_NO_SIMD)
#include <immintrin.h>
#include <x86intrin.h>
#define NAS_X86 1
#define ATTR_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,bmi2,popcnt")))
#define ATTR_AVX2 __attribute__((target("avx2,bmi2,fma,popcnt")))
#endif

/* ============================================================================================== */
/* rANS, the interleaved preset: S = 32, W = 16, P = 16.
 *
 * Decode, one symbol with frequency f and start c: q = x mod 2^16, x = (x >> 16) f + q - c, then a pop
 * exactly when x < 2^16 (N > 1: no word left is an error). A chunk of b bits of additional data is a
 * symbol of f = 2^(16-b): v = q >> (16 - b), x = (x >> 16) << (16 - b) | q mod 2^(16-b). Whether a chunk
 * step pops depends on x >> 16 alone (the new x is below 2^16 exactly when (x >> 16) < 2^b), and after
 * a pop x >> 16 is the x before it, so all of a block's pop decisions are known before any word is
 * read: the words are then fetched for all lanes at once, each lane's place in the stack being the
 * number of pops of the lanes before it (a prefix sum), which is what lets 16 states share one stack
 * and still decode side by side. That holds for at most one chunk per pair (bf16 and fp16 pairs); a
 * table with more runs in the scalar kernel. */

#define R16_LO 0x10000u  /* 2^(S - W): the normalized interval's bottom */
#define R16_VEC_MIN 1024 /* runs shorter than this stay scalar: their vector tables would cost more */
#define R16_KMAX 12      /* segments decoded side by side at most */

typedef struct {
    /* the stream */
    const uint16_t *w;
    int64_t nwords;
    int64_t N;
    /* per table t (width symbols each): frequency, start, chunks and their widths */
    const int64_t *freq, *cum, *nch, *chb, *nsym;
    const uint16_t *const *lrow; /* per table: its slot -> symbol row (2^16), or NULL: a search over cum */
    int64_t width, most;
    const int64_t *run_tab, *run_end;
    /* output: pairs (syms u8, extras u32) or values (item size osz) */
    int values, osz;
    uint8_t *out_s;
    uint32_t *out_e;
    void *out_v;
    int64_t out0;
    /* the values' join (values only): per table z, n_esc; per (table, symbol) the exponent field in
     * place or ESC; per table its escape group's exponent fields (in place) */
    const int64_t *z, *n_esc;
    const uint32_t *hi; /* ntab * width */
    const uint32_t *esc; /* ntab * esc_w */
    int64_t esc_w;
    unsigned wbits, m, top;
    /* vector tables (AVX-512 path), per table or NULL (R16VTab) */
    struct R16VTab **vt;
} R16;

/* A table in the vector kernel's form, small enough for the first-level cache but for lut8: the slot's
 * symbol from its bucket of 256 slots (most buckets hold one symbol, the rest two: the first symbol and
 * where the second starts; a bucket of three or more is looked up in lut8), then per symbol (f - 1) |
 * c << 16 and symbol | chunk bits << 8 | escape << 13 | exponent field << 16. */
typedef struct R16VTab {
    uint32_t bk[256]; /* s0 | cut << 8 (256: none) | more << 17 */
    uint32_t s1[256], s2[256];
    int small;        /* at most 32 symbols: the symbol by a binary search over cs, s1 and s2 read with permutes
                       * (no gather: some CPUs run gathers in microcode, tens of cycles each) */
    int top;          /* the search's first step: the largest power of two below nsym (0: one symbol) */
    uint32_t cs[32];  /* c of symbol s, 2^16 past the last symbol */
    int esc_small;    /* at most 32 escape exponents: read with a permute */
    uint32_t escv[32];
    uint8_t *lut8;    /* more than 32 symbols: 2^16 slots (and 64 bytes a 4-byte gather may pass) */
} R16VTab;

typedef struct {
    int64_t h, pos, stop, status;
    uint32_t x[MAXN]; /* lane k's state at index k */
    int done;
} R16Chain;

#define R16_ESC 0xffffffffu

/* The symbol whose slots hold q: the last s with cum[s] <= q (cum the prefix sums from 0 of n symbols). */
static inline unsigned r16_symbol(const int64_t *cum, int64_t n, uint32_t q) {
    int64_t lo = 0, hi = n;
    while (hi - lo > 1) {
        int64_t mid = (lo + hi) >> 1;
        if (cum[mid] <= (int64_t)q) lo = mid;
        else hi = mid;
    }
    return (unsigned)lo;
}

/* Pairs c->pos .. upto - 1, one at a time (any N, any chunk count); 0, or with c->status set: the pair
 * where the words ran out, or -2 (values) for an escape index outside its group. */
static int r16_scalar(const R16 *d, R16Chain *c, int64_t upto) {
    const uint16_t *w = d->w;
    const int64_t N = d->N;
    int64_t h = c->h, pos = c->pos;
    int64_t r = 0;
    while (d->run_end[r] <= pos) r++;
    int64_t lane = pos % N;
    int rc = 0;
    while (pos < upto) {
        int64_t end = d->run_end[r] < upto ? d->run_end[r] : upto;
        int64_t t = d->run_tab[r];
        const int64_t *freq = d->freq + t * d->width, *cum = d->cum + t * d->width, *nch = d->nch + t * d->width;
        const uint16_t *lut = d->lrow[t];
        const int64_t nsy = d->nsym[t];
        const unsigned z = d->values ? (unsigned)d->z[t] : 0, wt = d->wbits - z;
        for (; pos < end; pos++) {
            uint32_t x = c->x[lane];
            uint32_t q = x & 0xffffu;
            unsigned s = lut ? lut[q] : r16_symbol(cum, nsy, q);
            x = (x >> 16) * (uint32_t)freq[s] + q - (uint32_t)cum[s];
            /* the pops without a branch (whether a state pops is data, a branch on it mispredicts often): the
             * word below h is read whether or not it is taken (word 0 when none is left) */
#define R16_POP()                                                                                     \
            {                                                                                         \
                int pop_ = x < R16_LO;                                                                \
                if (UNLIKELY(pop_ && h == 0)) { c->status = pos; rc = 1; goto out; }                  \
                uint32_t wd_ = h ? w[h - 1] : 0;                                                      \
                x = pop_ ? x << 16 | wd_ : x;                                                         \
                h -= pop_;                                                                            \
            }
            R16_POP()
            uint32_t e = 0;
            const int64_t *cb = d->chb + (t * d->width + s) * d->most;
            for (int64_t k = 0; k < nch[s]; k++) {
                unsigned b = (unsigned)cb[k], sh = 16 - b;
                q = x & 0xffffu;
                e = (uint32_t)(((uint64_t)e << b) | (q >> sh));
                x = ((x >> 16) << sh) | (q & ((1u << sh) - 1u));
                R16_POP()
            }
#undef R16_POP
            c->x[lane] = x;
            if (++lane == N) lane = 0;
            if (pos < d->out0) continue;
            int64_t o = pos - d->out0;
            if (!d->values) {
                d->out_s[o] = (uint8_t)s;
                d->out_e[o] = e;
                continue;
            }
            uint32_t hi = d->hi[t * d->width + s];
            uint64_t ex = e;
            if (hi == R16_ESC) {
                uint64_t idx = ex >> wt;
                if (idx >= (uint64_t)d->n_esc[t]) { c->status = -2; rc = 1; goto out; }
                hi = d->esc[t * d->esc_w + idx];
                ex &= lowmask(wt);
            }
            ex <<= z;
            uint64_t v = ((ex >> d->m) << d->top) | hi | (ex & lowmask(d->m));
            if (d->osz == 2) ((uint16_t *)d->out_v)[o] = (uint16_t)v;
            else if (d->osz == 4) ((uint32_t *)d->out_v)[o] = (uint32_t)v;
            else ((uint8_t *)d->out_v)[o] = (uint8_t)v;
        }
        r++;
    }
out:
    c->h = h;
    c->pos = pos;
    return rc;
}

#ifdef NAS_X86
/* The AVX-512 decoder of N = 16: K chains (segments of the stream between checkpoints, each from its
 * own states and word count) side by side, each block of 16 pairs one dependency chain of about 60
 * cycles (two gathers, a multiply, the pops' prefix sum), so that the core overlaps several. A block
 * needs its 16 pairs in one run of a vector table, aligned on lane 0 (pair index a multiple of 16),
 * outputs from out0 on, and 32 words left (the window of words it may pop); the scalar kernel does
 * the rest. */
ATTR_AVX512 static void r16_avx512(const R16 *d, R16Chain **q, int64_t S) {
    const __m512i lo16 = _mm512_set1_epi32(0xffff), one = _mm512_set1_epi32(1), c31 = _mm512_set1_epi32(31);
    const __m512i c16 = _mm512_set1_epi32(16), lo8 = _mm512_set1_epi32(0xff), m31 = _mm512_set1_epi32(31);
    const __m512i escbit = _mm512_set1_epi32(1 << 13);
    const __m128i cm = _mm_cvtsi32_si128((int)d->m), ctop = _mm_cvtsi32_si128((int)d->top);
    const __m512i mmask = _mm512_set1_epi32((int)lowmask(d->m));
    const int K = S < R16_KMAX ? (int)S : R16_KMAX;
    /* K slots, each decoding one chain at a time; a slot whose chain is done takes the next of q */
    R16Chain *at[R16_KMAX];
    __m512i xv[R16_KMAX];
    int64_t r[R16_KMAX], fend[R16_KMAX], t_of[R16_KMAX], next = K;
    const R16VTab *vt[R16_KMAX];
#define R16_SLOT(c, chain)                                                                            \
    {                                                                                                 \
        at[c] = (chain);                                                                              \
        xv[c] = _mm512_loadu_si512((const void *)at[c]->x);                                           \
        r[c] = 0;                                                                                     \
        fend[c] = -1;                                                                                 \
        t_of[c] = 0;                                                                                  \
        vt[c] = NULL;                                                                                 \
    }
    for (int c = 0; c < K; c++) R16_SLOT(c, q[c])
    const __m512i lo9 = _mm512_set1_epi32(0x1ff), morebit = _mm512_set1_epi32(1 << 17);
    const __m512i c8 = _mm512_set1_epi32(8), c4 = _mm512_set1_epi32(4), c2 = _mm512_set1_epi32(2);
    const __m512i rlo = _mm512_set1_epi32((int)R16_LO);
    for (;;) {
        int active = 0;
        for (int c = 0; c < K; c++) {
            R16Chain *h = at[c];
            if (!h) continue;
            active = 1;
            if (h->done) {
                _mm512_storeu_si512((void *)h->x, xv[c]);
                if (next < S) R16_SLOT(c, q[next++])
                else at[c] = NULL;
                continue;
            }
            if (h->pos >= h->stop) { h->done = 1; continue; }
            if (fend[c] < 0 || h->pos >= fend[c]) {
                while (d->run_end[r[c]] <= h->pos) r[c]++;
                fend[c] = d->run_end[r[c]] < h->stop ? d->run_end[r[c]] : h->stop;
                t_of[c] = d->run_tab[r[c]];
                vt[c] = d->vt[t_of[c]];
            }
            int64_t pos = h->pos, hh = h->h;
            if (UNLIKELY(!vt[c] || (pos & 15) || pos + 16 > fend[c] || hh < 32 || pos < d->out0)) {
                /* the scalar kernel: up to the next aligned pair, the run's end, or (bottom) the stop */
                int64_t upto;
                if (hh < 32) upto = h->stop;
                else if (!vt[c]) upto = fend[c];
                else if (pos < d->out0) upto = d->out0 < fend[c] ? d->out0 : fend[c];
                else if (pos & 15) upto = (pos | 15) + 1 < fend[c] ? (pos | 15) + 1 : fend[c];
                else upto = fend[c];
                _mm512_storeu_si512((void *)h->x, xv[c]);
                if (r16_scalar(d, h, upto)) { h->done = 1; continue; }
                xv[c] = _mm512_loadu_si512((const void *)h->x);
                continue;
            }
            __m512i x = xv[c];
            __m512i q = _mm512_and_si512(x, lo16);
            const R16VTab *v_ = vt[c];
            __m512i sy, e1, e2;
            if (v_->small) {
                /* the symbol: the number of starts c_s (s >= 1) at or below q, by a binary search */
                const __m512i ca = _mm512_loadu_si512((const void *)v_->cs), cb2 = _mm512_loadu_si512((const void *)(v_->cs + 16));
                /* five steps whatever the count (cs is padded with 2^16, which no slot reaches) */
#define R16_STEP(ST)                                                                                  \
                {                                                                                     \
                    __m512i cand = _mm512_or_si512(sy, ST);                                            \
                    sy = _mm512_mask_mov_epi32(sy, _mm512_cmpge_epu32_mask(q, _mm512_permutex2var_epi32(ca, cand, cb2)), \
                                               cand);                                                 \
                }
                sy = _mm512_maskz_mov_epi32(_mm512_cmpge_epu32_mask(q, _mm512_set1_epi32((int)v_->cs[16])), c16);
                R16_STEP(c8) R16_STEP(c4) R16_STEP(c2) R16_STEP(one)
#undef R16_STEP
                e1 = _mm512_permutex2var_epi32(_mm512_loadu_si512((const void *)v_->s1), sy,
                                               _mm512_loadu_si512((const void *)(v_->s1 + 16)));
                e2 = _mm512_permutex2var_epi32(_mm512_loadu_si512((const void *)v_->s2), sy,
                                               _mm512_loadu_si512((const void *)(v_->s2 + 16)));
            } else {
                __m512i bk = _mm512_i32gather_epi32(_mm512_srli_epi32(q, 8), (const void *)v_->bk, 4);
                sy = _mm512_and_si512(bk, lo8);
                sy = _mm512_mask_add_epi32(sy, _mm512_cmpge_epu32_mask(_mm512_and_si512(q, lo8),
                                                                       _mm512_and_si512(_mm512_srli_epi32(bk, 8), lo9)),
                                           sy, one);
                __mmask16 more = _mm512_test_epi32_mask(bk, morebit);
                if (UNLIKELY(more))
                    sy = _mm512_mask_and_epi32(sy, more,
                                               _mm512_mask_i32gather_epi32(sy, more, q, (const void *)v_->lut8, 1), lo8);
                e1 = _mm512_i32gather_epi32(sy, (const void *)v_->s1, 4);
                e2 = _mm512_i32gather_epi32(sy, (const void *)v_->s2, 4);
            }
            __m512i f = _mm512_add_epi32(_mm512_and_si512(e1, lo16), one);
            __m512i xa = _mm512_add_epi32(_mm512_mullo_epi32(_mm512_srli_epi32(x, 16), f),
                                          _mm512_sub_epi32(q, _mm512_srli_epi32(e1, 16)));
            __mmask16 ma = _mm512_cmplt_epu32_mask(xa, rlo);
            __m512i b = _mm512_and_si512(_mm512_srli_epi32(e2, 8), m31);
            __m512i hia = _mm512_mask_mov_epi32(_mm512_srli_epi32(xa, 16), ma, xa);
            __mmask16 mb = _mm512_cmplt_epu32_mask(hia, _mm512_sllv_epi32(one, b));
            /* pops in stack order: lane 0's code, lane 0's chunk, lane 1's code, ...: lane k's code word is
             * the (rank)th from the top, rank = the pops of lanes 0 .. k-1 */
            __m512i ca = _mm512_maskz_mov_epi32(ma, one), cb = _mm512_maskz_mov_epi32(mb, one);
            __m512i cnt = _mm512_add_epi32(ca, cb);
            __m512i s = _mm512_add_epi32(cnt, _mm512_bslli_epi128(cnt, 4));
            s = _mm512_add_epi32(s, _mm512_bslli_epi128(s, 8));
            __m512i tl = _mm512_shuffle_epi32(s, _MM_PERM_DDDD);
            __m512i c1 = _mm512_maskz_shuffle_i32x4(0xfff0, tl, tl, 0x90);
            __m512i c2 = _mm512_maskz_shuffle_i32x4(0xff00, tl, tl, 0x40);
            __m512i c3 = _mm512_maskz_shuffle_i32x4(0xf000, tl, tl, 0x00);
            __m512i incl = _mm512_add_epi32(_mm512_add_epi32(s, c1), _mm512_add_epi32(c2, c3));
            __m512i ranka = _mm512_sub_epi32(incl, cnt);
            /* words h-32 .. h-1 as 32-bit lanes; the (rank)th from the top is entry 31 - rank */
            /* the words are read downwards, a line every three blocks or so, by up to R16_KMAX chains at once:
             * more descending streams than the hardware prefetcher follows */
            _mm_prefetch((const char *)((uintptr_t)(d->w + hh) - 1024), _MM_HINT_T0);
            __m512i win = _mm512_loadu_si512((const void *)(d->w + hh - 32));
            __m512i wlo = _mm512_cvtepu16_epi32(_mm512_castsi512_si256(win));
            __m512i whi = _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(win, 1));
            __m512i ia = _mm512_sub_epi32(c31, ranka);
            __m512i wa = _mm512_permutex2var_epi32(wlo, ia, whi);
            __m512i wb = _mm512_permutex2var_epi32(wlo, _mm512_sub_epi32(ia, ca), whi);
            xa = _mm512_mask_or_epi32(xa, ma, _mm512_slli_epi32(xa, 16), wa);
            /* the chunk (b = 0: none, x unchanged and v = 0) */
            __m512i sh = _mm512_sub_epi32(c16, b);
            __m512i q2 = _mm512_and_si512(xa, lo16);
            __m512i v = _mm512_srlv_epi32(q2, sh);
            __m512i xb = _mm512_or_si512(_mm512_sllv_epi32(hia, sh),
                                         _mm512_and_si512(q2, _mm512_sub_epi32(_mm512_sllv_epi32(one, sh), one)));
            xv[c] = _mm512_mask_or_epi32(xb, mb, _mm512_slli_epi32(xb, 16), wb);
            int64_t o = pos - d->out0;
            if (!d->values) {
                _mm_storeu_si128((__m128i *)(d->out_s + o), _mm512_cvtepi32_epi8(_mm512_and_si512(e2, lo8)));
                _mm512_storeu_si512((void *)(d->out_e + o), v);
            } else {
                __m512i hi = _mm512_sll_epi32(_mm512_and_si512(_mm512_srli_epi32(e2, 16), lo8), cm);
                __mmask16 em = _mm512_test_epi32_mask(e2, escbit);
                unsigned z = (unsigned)d->z[t_of[c]], wt = d->wbits - z;
                if (UNLIKELY(em)) {
                    __m512i ix = _mm512_srl_epi32(v, _mm_cvtsi32_si128((int)wt));
                    if (_mm512_mask_cmpge_epu32_mask(em, ix, _mm512_set1_epi32((int)d->n_esc[t_of[c]]))) {
                        /* an escape index outside its group: the scalar kernel names it */
                        _mm512_storeu_si512((void *)h->x, x);
                        r16_scalar(d, h, pos + 16);
                        h->done = 1;
                        if (h->status == -1) h->status = -2;
                        continue;
                    }
                    if (v_->esc_small)
                        hi = _mm512_mask_mov_epi32(hi, em, _mm512_permutex2var_epi32(
                                                           _mm512_loadu_si512((const void *)v_->escv), ix,
                                                           _mm512_loadu_si512((const void *)(v_->escv + 16))));
                    else
                        hi = _mm512_mask_i32gather_epi32(hi, em, ix, (const void *)(d->esc + t_of[c] * d->esc_w), 4);
                    v = _mm512_mask_and_epi32(v, em, v, _mm512_set1_epi32((int)lowmask(wt)));
                }
                __m512i xz = _mm512_sll_epi32(v, _mm_cvtsi32_si128((int)z));
                __m512i sg = _mm512_sll_epi32(_mm512_srl_epi32(xz, cm), ctop);
                __m512i val = _mm512_ternarylogic_epi32(sg, hi, _mm512_and_si512(xz, mmask), 0xfe);
                if (d->osz == 2) _mm256_storeu_si256((__m256i *)((uint16_t *)d->out_v + o), _mm512_cvtepi32_epi16(val));
                else _mm512_storeu_si512((void *)((uint32_t *)d->out_v + o), val);
            }
            h->h = hh - _mm_popcnt_u32((unsigned)ma) - _mm_popcnt_u32((unsigned)mb);
            h->pos = pos + 16;
        }
        if (!active) break;
    }
#undef R16_SLOT
}
#endif

static int r16_longer_first(const void *a, const void *b) {
    const R16Chain *x = *(R16Chain *const *)a, *y = *(R16Chain *const *)b;
    int64_t lx = x->stop - x->pos, ly = y->stop - y->pos;
    return lx > ly ? -1 : lx < ly ? 1 : (x < y ? -1 : x > y);
}

/* rans16_decode(words u16, hs i64[S], states u64[S*N], freq, cum, nsym, nchunk,
 *               chunk_b, run_tab, run_end, poss i64[S], stops i64[S], out0, out_s, out_e,
 *               values (0 pairs, 1 values), z, n_esc, hi u32[ntab*width], esc u32[ntab*esc_w], w, m, top,
 *               statuses i64[S]) -> None
 * Segments s = 0 .. S-1 of one rans16xN stream: pairs poss[s] .. stops[s]-1 from hs[s] words left and the
 * states of segment s (lane k at s * N + k). Pairs: out_s (u8) and out_e (u32) at pair - out0, from out0
 * on; values: out_s is the values array (item size 1, 2 or 4) at pair - out0 (out_e unused). Per
 * segment: statuses -1 success (hs and states then those after its last pair), >= 0 the pair where the
 * words ran out, -2 an escape index outside its group. Each table's starts are its frequencies' prefix
 * sums over all 2^16 slots (the coders' tables always are; any other is refused): the slot -> symbol
 * lookups are built here, from freq and cum, only for the tables that need them. */
HIDDEN PyObject *nas_py_rans16_decode(PyObject *self, PyObject *args) {
    PyObject *ow, *oh, *ost, *of, *oc, *ons, *onc, *ocb, *ort, *ore, *opos, *ostop, *oos, *ooe, *oz, *one_,
        *ohi, *oesc, *ostat;
    long long out0, values, w_, m_, top_;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOOLOOLOOOOLLLO", &ow, &oh, &ost, &of, &oc, &ons, &onc, &ocb, &ort,
                          &ore, &opos, &ostop, &out0, &oos, &ooe, &values, &oz, &one_, &ohi, &oesc, &w_, &m_, &top_,
                          &ostat))
        return NULL;
    Buf w = {0}, hb = {0}, st = {0}, f = {0}, c = {0}, ns = {0}, nc = {0}, cb = {0}, rt = {0}, re = {0},
        ps = {0}, sp = {0}, os = {0}, oe = {0}, zb = {0}, neb = {0}, hib = {0}, eb = {0}, sts = {0};
    PyObject *res = NULL;
    R16VTab **vt = NULL;
    R16Chain *chs = NULL, **q = NULL;
    uint16_t **rows = NULL;
    int64_t *span = NULL;
    int64_t ntab = 0;
    if (get_buf(ow, &w, 0, 2, "words") || get_buf(oh, &hb, 1, 8, "hs") || get_buf(ost, &st, 1, 8, "states") ||
        get_buf(of, &f, 0, 8, "freq") || get_buf(oc, &c, 0, 8, "cum") ||
        get_buf(ons, &ns, 0, 8, "nsym") || get_buf(onc, &nc, 0, 8, "nchunk") || get_buf(ocb, &cb, 0, 8, "chunk_b") ||
        get_buf(ort, &rt, 0, 8, "run_tab") || get_buf(ore, &re, 0, 8, "run_end") || get_buf(opos, &ps, 0, 8, "poss") ||
        get_buf(ostop, &sp, 0, 8, "stops") || get_buf(oos, &os, 1, 0, "out_s") || get_buf(ooe, &oe, 1, 0, "out_e") ||
        get_buf(oz, &zb, 0, 8, "z") || get_buf(one_, &neb, 0, 8, "n_esc") || get_buf(ohi, &hib, 0, 4, "hi") ||
        get_buf(oesc, &eb, 0, 4, "esc") || get_buf(ostat, &sts, 1, 8, "statuses"))
        goto out;
    {
        int64_t S = NITEMS(hb), N = S ? NITEMS(st) / S : 0;
        ntab = NITEMS(ns);
        int64_t width = ntab ? NITEMS(f) / ntab : 0, most = (ntab && width) ? NITEMS(cb) / (ntab * width) : 0;
        int64_t n_runs = NITEMS(rt);
        int osz = (int)os.view.itemsize;
        int64_t nout = NITEMS(os);
        int bad = S < 1 || N < 1 || N > MAXN || NITEMS(st) != S * N || NITEMS(ps) != S || NITEMS(sp) != S ||
                  NITEMS(sts) != S || ntab < 1 || width < 1 || NITEMS(c) != ntab * width ||
                  NITEMS(nc) != ntab * width || most < 1 || NITEMS(cb) != ntab * width * most ||
                  n_runs < 1 || NITEMS(re) != n_runs || out0 < 0;
        if (!bad && !values)
            bad = osz != 1 || oe.view.itemsize != 4 || NITEMS(oe) != nout;
        int64_t esc_w = 0;
        if (!bad && values) {
            esc_w = NITEMS(eb) / ntab;
            bad = (osz != 1 && osz != 2 && osz != 4) || NITEMS(zb) != ntab || NITEMS(neb) != ntab ||
                  NITEMS(hib) != ntab * width || esc_w * ntab != NITEMS(eb) || w_ < 0 || w_ > 31 || m_ < 0 ||
                  m_ > w_ || top_ < 0 || top_ > 8 * osz - 1;
        }
        const int64_t *poss = (const int64_t *)ps.view.buf, *stops = (const int64_t *)sp.view.buf;
        int64_t *hs = (int64_t *)hb.view.buf;
        for (int64_t s = 0; !bad && s < S; s++)
            bad = poss[s] < 0 || poss[s] > stops[s] || (stops[s] > poss[s] && (poss[s] < out0 ? out0 : poss[s]) < stops[s]
                                                         && stops[s] - out0 > nout) || hs[s] < 0 || hs[s] > NITEMS(w);
        if (bad) {
            PyErr_SetString(PyExc_ValueError, "rans16_decode: inconsistent arguments");
            goto out;
        }
        const int64_t *run_tab = (const int64_t *)rt.view.buf, *run_end = (const int64_t *)re.view.buf;
        const int64_t *nsym = (const int64_t *)ns.view.buf, *freq = (const int64_t *)f.view.buf,
                      *cum = (const int64_t *)c.view.buf, *nch = (const int64_t *)nc.view.buf,
                      *chb = (const int64_t *)cb.view.buf;
        for (int64_t i = 0; i < n_runs; i++)
            if (run_tab[i] < 0 || run_tab[i] >= ntab) goto badtab;
        for (int64_t s = 0; s < S; s++)
            if (stops[s] > 0 && run_end[n_runs - 1] < stops[s]) goto badtab;
        for (int64_t t = 0; t < ntab; t++) {
            if (nsym[t] < 1 || nsym[t] > width) goto badtab;
            int64_t c0 = 0;
            for (int64_t q = 0; q < nsym[t]; q++) {
                int64_t i = t * width + q;
                if (freq[i] < 1 || cum[i] != c0 || nch[i] < 0 || nch[i] > most) goto badtab;
                for (int64_t k = 0; k < nch[i]; k++)
                    if (chb[i * most + k] < 1 || chb[i * most + k] > 16) goto badtab;
                c0 += freq[i];
            }
            if (c0 != 65536) goto badtab;
            if (values) {
                const int64_t *zz = (const int64_t *)zb.view.buf, *ne = (const int64_t *)neb.view.buf;
                if (zz[t] < 0 || zz[t] > w_ || ne[t] < 0 || ne[t] > esc_w) goto badtab;
            }
        }
        const uint64_t *s64 = (const uint64_t *)st.view.buf;
        chs = (R16Chain *)calloc((size_t)S, sizeof(R16Chain));
        q = (R16Chain **)calloc((size_t)S, sizeof(R16Chain *));
        vt = (R16VTab **)calloc((size_t)ntab, sizeof(R16VTab *));
        rows = (uint16_t **)calloc((size_t)ntab, sizeof(uint16_t *));
        span = (int64_t *)calloc((size_t)ntab, sizeof(int64_t));
        if (!chs || !q || !vt || !rows || !span) { PyErr_NoMemory(); goto out; }
        for (int64_t i = 0; i + 1 < n_runs; i++) /* per table, the pairs of its runs this call decodes */
            for (int64_t s = 0, a0 = i ? run_end[i - 1] : 0; s < S; s++) {
                int64_t lo_ = poss[s] > a0 ? poss[s] : a0, hi_ = stops[s] < run_end[i] ? stops[s] : run_end[i];
                if (hi_ > lo_) span[run_tab[i]] += hi_ - lo_;
            }
        for (int64_t s = 0; s < S; s++) {
            chs[s].h = hs[s]; chs[s].pos = poss[s]; chs[s].stop = stops[s]; chs[s].status = -1;
            for (int64_t k = 0; k < N; k++) {
                if (s64[s * N + k] >> 32) {
                    PyErr_SetString(PyExc_ValueError, "rans16_decode: a state outside 32 bits");
                    goto out;
                }
                chs[s].x[k] = (uint32_t)s64[s * N + k];
            }
        }
        R16 d = {(const uint16_t *)w.view.buf, NITEMS(w), N, freq, cum, nch, chb, nsym,
                 (const uint16_t *const *)rows, width, most, run_tab,
                 run_end, (int)values, osz, values ? NULL : (uint8_t *)os.view.buf,
                 values ? NULL : (uint32_t *)oe.view.buf, values ? os.view.buf : NULL, out0,
                 values ? (const int64_t *)zb.view.buf : NULL, values ? (const int64_t *)neb.view.buf : NULL,
                 values ? (const uint32_t *)hib.view.buf : NULL, values ? (const uint32_t *)eb.view.buf : NULL, esc_w,
                 (unsigned)w_, (unsigned)m_, (unsigned)top_, vt};
        int vec = 0;
        (void)vec;
#ifdef NAS_X86
        /* the vector tables, for tables with at most one chunk per symbol, at most 256 symbols and
         * R16_VEC_MIN pairs or more to decode; 16-bit values only */
        if (nas_level >= 2 && N == 16 && (!values || osz == 2 || osz == 4)) {
            for (int64_t t = 0; t < ntab; t++) {
                if (nsym[t] > 256 || span[t] < R16_VEC_MIN) continue;
                int ok = 1;
                for (int64_t q = 0; q < nsym[t]; q++) {
                    int64_t j = t * width + q;
                    if (nch[j] > 1) ok = 0;
                    if (values && d.hi[j] != R16_ESC && ((d.hi[j] >> m_) >> 8)) ok = 0;
                }
                if (!ok) continue;
                R16VTab *a = (R16VTab *)calloc(1, sizeof(R16VTab));
                if (!a) { PyErr_NoMemory(); goto out; }
                d.vt[t] = a;
                for (int64_t q = 0; q < nsym[t]; q++) {
                    int64_t j = t * width + q;
                    a->s1[q] = (uint32_t)(freq[j] - 1) | (uint32_t)cum[j] << 16;
                    a->s2[q] = (uint32_t)q | (uint32_t)(nch[j] ? chb[j * most] : 0) << 8;
                    if (values) a->s2[q] |= d.hi[j] == R16_ESC ? 1u << 13 : ((d.hi[j] >> m_) & 0xffu) << 16;
                }
                a->small = nsym[t] <= 32;
                if (!a->small) { /* the gather path's slot lookups */
                    a->lut8 = (uint8_t *)malloc(65536 + 64);
                    if (!a->lut8) { PyErr_NoMemory(); goto out; }
                    for (int64_t q = 0; q < nsym[t]; q++)
                        memset(a->lut8 + cum[t * width + q], (int)q, (size_t)freq[t * width + q]);
                }
                for (int64_t b = 0; b < 256; b++) {
                    unsigned s0 = r16_symbol(cum + t * width, nsym[t], (uint32_t)(256 * b)),
                             s1 = r16_symbol(cum + t * width, nsym[t], (uint32_t)(256 * b + 255));
                    uint32_t e = s0;
                    if (s1 == s0) e |= 256u << 8;
                    else if (s1 == s0 + 1) e |= (uint32_t)(cum[t * width + s1] - 256 * b) << 8;
                    else e |= 1u << 17;
                    a->bk[b] = e;
                }
                a->top = 0; /* the largest power of two below nsym */
                while ((a->top ? 2 * a->top : 1) < nsym[t]) a->top = a->top ? 2 * a->top : 1;
                for (int64_t q = 0; q < 32; q++) a->cs[q] = q < nsym[t] ? (uint32_t)cum[t * width + q] : 65536u;
                if (values) {
                    int64_t ne = ((const int64_t *)neb.view.buf)[t];
                    a->esc_small = ne <= 32;
                    for (int64_t q = 0; q < ne && q < 32; q++) a->escv[q] = d.esc[t * esc_w + q];
                }
                vec = 1;
            }
        }
#endif
        /* a slot -> symbol row for each table the scalar kernel decodes many pairs of (the others, at the
         * vector runs' edges, search cum) */
        for (int64_t t = 0; t < ntab; t++) {
            if (d.vt[t] || span[t] < R16_VEC_MIN) continue;
            rows[t] = (uint16_t *)malloc(65536 * sizeof(uint16_t));
            if (!rows[t]) { PyErr_NoMemory(); goto out; }
            for (int64_t q = 0; q < nsym[t]; q++)
                for (int64_t k = cum[t * width + q], e = k + freq[t * width + q]; k < e; k++) rows[t][k] = (uint16_t)q;
        }
        Py_BEGIN_ALLOW_THREADS
#ifdef NAS_X86
        if (vec) {
            /* longest first, so that the slots run out of chains together rather than one long chain
             * finishing alone (a chain alone is bound by its latency, not by the core's throughput) */
            for (int64_t s = 0; s < S; s++) q[s] = &chs[s];
            qsort(q, (size_t)S, sizeof(R16Chain *), r16_longer_first);
            r16_avx512(&d, q, S);
        } else
#endif
            for (int64_t s = 0; s < S; s++) r16_scalar(&d, &chs[s], stops[s]);
        Py_END_ALLOW_THREADS
        int64_t *statuses = (int64_t *)sts.view.buf;
        uint64_t *sw = (uint64_t *)st.view.buf;
        for (int64_t s = 0; s < S; s++) {
            statuses[s] = chs[s].status;
            hs[s] = chs[s].h;
            for (int64_t k = 0; k < N; k++) sw[s * N + k] = chs[s].x[k];
        }
        Py_INCREF(Py_None);
        res = Py_None;
        goto out;
    badtab:
        PyErr_SetString(PyExc_ValueError, "rans16_decode: table outside its limits");
    }
out:
    if (vt)
        for (int64_t t = 0; t < ntab; t++) {
            if (vt[t]) free(vt[t]->lut8);
            free(vt[t]);
        }
    free(vt);
    if (rows)
        for (int64_t t = 0; t < ntab; t++) free(rows[t]);
    free(rows);
    free(span);
    free(chs);
    free(q);
    rel(&w); rel(&hb); rel(&st); rel(&f); rel(&c); rel(&ns); rel(&nc); rel(&cb); rel(&rt); rel(&re);
    rel(&ps); rel(&sp); rel(&os); rel(&oe); rel(&zb); rel(&neb); rel(&hib); rel(&eb); rel(&sts);
    return res;
}

/* ---------------------------------------------------------------------------------------------- */
/* rANS encode, the interleaved preset. Encode of a b-bit chunk v: push x mod 2^16 when x >> 16 >=
 * 2^(16-b), then x = (x >> (16-b)) << 16 | v << (16-b) | x mod 2^(16-b); of a symbol: push when
 * x >> 16 >= f, then x = (x div f) << 16 | (c + x mod f). */

typedef struct {
    const uint8_t *s8;
    const int64_t *s64;
    const uint32_t *e32;
    const uint64_t *e64;
    const int64_t *freq, *cum, *nsym, *kb, *nch, *chb;
    int64_t width, most, N, interval;
    const int64_t *run_tab, *run_end;
    int64_t n_runs;
    uint16_t *out;
    int64_t cap;
    uint64_t *cps;
    int64_t rows;
    /* vector tables (AVX-512), per table or NULL: 256 entries each, (f - 1) | c << 16, and k | 1 << 8 where
     * the symbol is in the table (k <= 16: one chunk) */
    const uint32_t *const *v1, *const *v2;
} R16Enc;

/* One pair i of the scalar encoder with lane state *xp; 0, 1 (a pair outside its table), 3 (overflow). */
static inline int r16_enc_pair(const R16Enc *d, int64_t t, int64_t i, uint32_t *xp, int64_t *nwp) {
    int64_t sym = d->s8 ? (int64_t)d->s8[i] : d->s64[i];
    uint64_t ev = d->e32 ? (uint64_t)d->e32[i] : d->e64[i];
    if (sym < 0 || sym >= d->nsym[t]) return 1;
    int64_t ti = t * d->width + sym;
    if (d->kb[ti] < 64 && (ev >> d->kb[ti])) return 1;
    uint32_t x = *xp;
    int64_t nw = *nwp;
    /* the pushes without a branch: the word is stored whether or not it is pushed (the next store
     * overwrites it), so the buffer needs room for one */
    for (int64_t k = d->nch[ti] - 1; k >= 0; k--) {
        unsigned b = (unsigned)d->chb[ti * d->most + k], sh = 16 - b;
        uint32_t v = (uint32_t)(ev & lowmask(b));
        ev >>= b;
        if (UNLIKELY(nw >= d->cap)) return 3;
        int push = (x >> 16) >= (1u << sh);
        d->out[nw] = (uint16_t)x;
        nw += push;
        x = push ? x >> 16 : x;
        x = ((x >> sh) << 16) | (v << sh) | (x & ((1u << sh) - 1u));
    }
    uint32_t fs = (uint32_t)d->freq[ti];
    if (UNLIKELY(nw >= d->cap)) return 3;
    int push = (x >> 16) >= fs;
    d->out[nw] = (uint16_t)x;
    nw += push;
    x = push ? x >> 16 : x;
    *xp = ((x / fs) << 16) | ((uint32_t)d->cum[ti] + x % fs);
    *nwp = nw;
    return 0;
}

#ifdef NAS_X86
/* Blocks of 16 pairs (pair lo + 16 j .. lo + 16 j + 15, lo a multiple of 16) from the top one (ending at
 * *ip) down to lo, the 16 states in one register. Each lane's words (its chunk's, then its symbol's) are
 * known from its own state; the block's words go out in the encoder's order (lane 15 first, chunk before
 * symbol) by a compress. Returns 0, or 1 when a block holds a pair outside its table (the scalar encoder
 * then names it; *ip is that block's top pair). */
ATTR_AVX512 static int r16_enc_avx512(const R16Enc *d, int64_t t, int64_t lo, int64_t *ip, uint32_t *xs, int64_t *nwp) {
    const uint32_t *v1 = d->v1[t], *v2 = d->v2[t];
    const __m512i lo16 = _mm512_set1_epi32(0xffff), one = _mm512_set1_epi32(1), c16 = _mm512_set1_epi32(16);
    const __m512i m31 = _mm512_set1_epi32(31), in_tab = _mm512_set1_epi32(1 << 8);
    /* the output order: lanes 15 .. 8, then 7 .. 0, chunk word before symbol word */
    const __m512i idx1 = _mm512_set_epi32(24, 8, 25, 9, 26, 10, 27, 11, 28, 12, 29, 13, 30, 14, 31, 15);
    const __m512i idx2 = _mm512_set_epi32(16, 0, 17, 1, 18, 2, 19, 3, 20, 4, 21, 5, 22, 6, 23, 7);
    __m512i x = _mm512_loadu_si512((const void *)xs);
    const int small = d->nsym[t] <= 32;
    const __m512i c32 = _mm512_set1_epi32(32);
    const __m512i v1a = _mm512_loadu_si512((const void *)v1), v1b = _mm512_loadu_si512((const void *)(v1 + 16));
    const __m512i v2a = _mm512_loadu_si512((const void *)v2), v2b = _mm512_loadu_si512((const void *)(v2 + 16));
    int64_t i = *ip, nw = *nwp;
    int rc = 0;
    while (i - 15 >= lo && nw + 32 <= d->cap) {
        int64_t b0 = i - 15;
        __m512i sym = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(d->s8 + b0)));
        __m512i ev = _mm512_loadu_si512((const void *)(d->e32 + b0));
        __m512i e1, e2;
        if (small) {
            /* at most 32 symbols: permutes (a symbol from 32 on is outside the table: flagged as such) */
            e2 = _mm512_maskz_permutex2var_epi32(_mm512_cmplt_epu32_mask(sym, c32), v2a, sym, v2b);
            e1 = _mm512_permutex2var_epi32(v1a, sym, v1b);
        } else {
            e2 = _mm512_i32gather_epi32(sym, (const void *)v2, 4);
            e1 = _mm512_i32gather_epi32(sym, (const void *)v1, 4);
        }
        __m512i k = _mm512_and_si512(e2, m31);
        /* a symbol outside the table, or additional data wider than its k bits */
        if (UNLIKELY(_mm512_test_epi32_mask(e2, in_tab) != 0xffff ||
                     _mm512_test_epi32_mask(_mm512_srlv_epi32(ev, k), _mm512_srlv_epi32(ev, k)))) {
            rc = 1;
            break;
        }
        /* the chunk (k = 0: none, nothing pushed and x unchanged) */
        __m512i sh = _mm512_sub_epi32(c16, k);
        __mmask16 pc = _mm512_cmpge_epu32_mask(_mm512_srli_epi32(x, 16), _mm512_sllv_epi32(one, sh));
        __m512i wc = _mm512_and_si512(x, lo16);
        x = _mm512_mask_srli_epi32(x, pc, x, 16);
        x = _mm512_or_si512(_mm512_or_si512(_mm512_slli_epi32(_mm512_srlv_epi32(x, sh), 16), _mm512_sllv_epi32(ev, sh)),
                            _mm512_and_si512(x, _mm512_sub_epi32(_mm512_sllv_epi32(one, sh), one)));
        /* the symbol */
        __m512i f = _mm512_add_epi32(_mm512_and_si512(e1, lo16), one);
        __mmask16 ps = _mm512_cmpge_epu32_mask(_mm512_srli_epi32(x, 16), f);
        __m512i wsy = _mm512_and_si512(x, lo16);
        x = _mm512_mask_srli_epi32(x, ps, x, 16);
        /* x div f: a float quotient (x < f 2^16, so it is off by at most one), then corrected */
        __m512i q = _mm512_cvttps_epu32(_mm512_div_ps(_mm512_cvtepu32_ps(x), _mm512_cvtepu32_ps(f)));
        __m512i rr = _mm512_sub_epi32(x, _mm512_mullo_epi32(q, f));
        __mmask16 neg = _mm512_cmplt_epi32_mask(rr, _mm512_setzero_si512());
        q = _mm512_mask_sub_epi32(q, neg, q, one);
        rr = _mm512_mask_add_epi32(rr, neg, rr, f);
        __mmask16 big = _mm512_cmpge_epi32_mask(rr, f);
        q = _mm512_mask_add_epi32(q, big, q, one);
        rr = _mm512_mask_sub_epi32(rr, big, rr, f);
        x = _mm512_or_si512(_mm512_slli_epi32(q, 16), _mm512_add_epi32(_mm512_srli_epi32(e1, 16), rr));
        /* the words, in order */
        __m512i z1 = _mm512_permutex2var_epi32(wc, idx1, wsy), z2 = _mm512_permutex2var_epi32(wc, idx2, wsy);
        __m512i fc = _mm512_maskz_mov_epi32(pc, one), fsy = _mm512_maskz_mov_epi32(ps, one);
        __mmask16 k1 = _mm512_test_epi32_mask(_mm512_permutex2var_epi32(fc, idx1, fsy), one);
        __mmask16 k2 = _mm512_test_epi32_mask(_mm512_permutex2var_epi32(fc, idx2, fsy), one);
        unsigned n1 = (unsigned)_mm_popcnt_u32(k1), n2 = (unsigned)_mm_popcnt_u32(k2);
        _mm512_mask_cvtepi32_storeu_epi16(d->out + nw, (__mmask16)((1u << n1) - 1u), _mm512_maskz_compress_epi32(k1, z1));
        nw += n1;
        _mm512_mask_cvtepi32_storeu_epi16(d->out + nw, (__mmask16)((1u << n2) - 1u), _mm512_maskz_compress_epi32(k2, z2));
        nw += n2;
        i -= 16;
    }
    _mm512_storeu_si512((void *)xs, x);
    *ip = i;
    *nwp = nw;
    return rc;
}
#endif

/* rans16_encode(syms, exs, run_tab, run_end, freq, cum, nsym, kb, nchunk, chunk_b, N, interval, out (u16),
 *               cps (u64 [rows, 3 + N])) -> (status, nw_or_bad, nc): rans_encode for the interleaved preset
 * (S = 32, W = 16, P = 16, N > 1), the same words and checkpoints. */
HIDDEN PyObject *nas_py_rans16_encode(PyObject *self, PyObject *args) {
    PyObject *os_, *oe_, *ort, *ore, *of, *oc, *ons, *okb, *onc, *ocb, *oout, *ocps;
    long long N, interval;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOLLOO", &os_, &oe_, &ort, &ore, &of, &oc, &ons, &okb, &onc, &ocb, &N,
                          &interval, &oout, &ocps))
        return NULL;
    Buf s = {0}, e = {0}, rt = {0}, re = {0}, f = {0}, c = {0}, ns = {0}, kb = {0}, nc = {0}, cb = {0}, out = {0},
        cps = {0};
    PyObject *res = NULL;
    uint32_t *vbuf = NULL;
    const uint32_t **vp = NULL;
    if (get_buf(os_, &s, 0, 0, "syms") || get_buf(oe_, &e, 0, 0, "exs") || get_buf(ort, &rt, 0, 8, "run_tab") ||
        get_buf(ore, &re, 0, 8, "run_end") || get_buf(of, &f, 0, 8, "freq") || get_buf(oc, &c, 0, 8, "cum") ||
        get_buf(ons, &ns, 0, 8, "nsym") || get_buf(okb, &kb, 0, 8, "kb") || get_buf(onc, &nc, 0, 8, "nchunk") ||
        get_buf(ocb, &cb, 0, 8, "chunk_b") || get_buf(oout, &out, 1, 2, "out") || get_buf(ocps, &cps, 1, 8, "cps"))
        goto out;
    {
        int small = s.view.itemsize == 1 && e.view.itemsize == 4, wide = s.view.itemsize == 8 && e.view.itemsize == 8;
        int64_t n = NITEMS(s), ntab = NITEMS(ns), n_runs = NITEMS(rt);
        int64_t width = ntab ? NITEMS(f) / ntab : 0, most = (ntab && width) ? NITEMS(cb) / (ntab * width) : 0;
        if (!(small || wide) || NITEMS(e) != n || N < 2 || N > MAXN || ntab < 1 || width < 1 ||
            NITEMS(c) != ntab * width || NITEMS(kb) != ntab * width || NITEMS(nc) != ntab * width || most < 1 ||
            NITEMS(cb) != ntab * width * most || interval < 0 || NITEMS(cps) % (3 + N) || n_runs < 1 ||
            NITEMS(re) != n_runs) {
            PyErr_SetString(PyExc_ValueError, "rans16_encode: inconsistent arguments");
            goto out;
        }
        const int64_t *run_tab = (const int64_t *)rt.view.buf, *run_end = (const int64_t *)re.view.buf;
        for (int64_t i = 0; i < n_runs; i++)
            if (run_tab[i] < 0 || run_tab[i] >= ntab) goto badtab;
        if (n_runs < 2 ? n != 0 : run_end[n_runs - 2] != n) {
            PyErr_SetString(PyExc_ValueError, "rans16_encode: runs do not cover the pairs");
            goto out;
        }
        const int64_t *nsym = (const int64_t *)ns.view.buf, *freq = (const int64_t *)f.view.buf,
                      *cum = (const int64_t *)c.view.buf, *kbits = (const int64_t *)kb.view.buf,
                      *nch = (const int64_t *)nc.view.buf, *chb = (const int64_t *)cb.view.buf;
        for (int64_t t = 0; t < ntab; t++) {
            if (nsym[t] < 0 || nsym[t] > width) goto badtab;
            for (int64_t q = 0; q < nsym[t]; q++) {
                int64_t i = t * width + q;
                if (freq[i] < 1 || cum[i] < 0 || cum[i] + freq[i] > 65536 || nch[i] < 0 || nch[i] > most ||
                    kbits[i] < 0)
                    goto badtab;
                for (int64_t k = 0; k < nch[i]; k++)
                    if (chb[i * most + k] < 1 || chb[i * most + k] > 16) goto badtab;
            }
        }
        R16Enc d = {small ? (const uint8_t *)s.view.buf : NULL, small ? NULL : (const int64_t *)s.view.buf,
                    small ? (const uint32_t *)e.view.buf : NULL, small ? NULL : (const uint64_t *)e.view.buf,
                    freq, cum, nsym, kbits, nch, chb, width, most, N, interval, run_tab, run_end, n_runs - 1,
                    (uint16_t *)out.view.buf, NITEMS(out), (uint64_t *)cps.view.buf, NITEMS(cps) / (3 + N), NULL, NULL};
        int vec = 0;
        (void)vec;
#ifdef NAS_X86
        if (nas_level >= 2 && N == 16 && small) {
            vbuf = (uint32_t *)calloc((size_t)(ntab * 512), sizeof(uint32_t));
            vp = (const uint32_t **)calloc((size_t)(2 * ntab), sizeof(uint32_t *));
            if (!vbuf || !vp) { PyErr_NoMemory(); goto out; }
            for (int64_t t = 0; t < ntab; t++) {
                int ok = nsym[t] <= 256;
                for (int64_t q = 0; ok && q < nsym[t]; q++) {
                    int64_t j = t * width + q;
                    /* the kernel takes k bits as one chunk of k bits */
                    if (!(nch[j] == 0 ? kbits[j] == 0 : nch[j] == 1 && chb[j * most] == kbits[j])) ok = 0;
                }
                if (!ok) continue;
                uint32_t *a1 = vbuf + t * 512, *a2 = a1 + 256;
                for (int64_t q = 0; q < nsym[t]; q++) {
                    a1[q] = (uint32_t)(freq[t * width + q] - 1) | (uint32_t)cum[t * width + q] << 16;
                    a2[q] = (uint32_t)kbits[t * width + q] | 1u << 8;
                }
                vp[t] = a1;
                vp[ntab + t] = a2;
                vec = 1;
            }
            d.v1 = vp;
            d.v2 = vp + ntab;
        }
#endif
        int64_t nw = 0, ncp = 0, status = 0, bad = 0;
        uint32_t xs[MAXN];
        Py_BEGIN_ALLOW_THREADS
        for (int k = 0; k < N; k++) xs[k] = R16_LO;
        int64_t r = n_runs - 2;
        int64_t i = n - 1, lane = n ? (n - 1) % N : 0; /* the lane of pair i */
        while (i >= 0 && !status) {
            while (r > 0 && run_end[r - 1] > i) r--;
            int64_t run_start = r > 0 ? run_end[r - 1] : 0;
            int64_t cp = (interval > 0 && i > 0) ? (i / interval) * interval : 0;
            int64_t lo = run_start > cp ? run_start : cp;
            int64_t t = run_tab[r];
            while (i >= lo) {
#ifdef NAS_X86
                if (vec && d.v1[t] && (i & 15) == 15 && i - 15 >= lo) {
                    r16_enc_avx512(&d, t, lo, &i, xs, &nw);
                    /* then the pairs below the last whole block, or a block the kernel left (a pair outside its
                     * table, which the scalar step names, or a buffer near its end) pair by pair */
                    int64_t b0 = i - 15 > lo ? i - 15 : lo;
                    lane = i % N;
                    while (i >= b0 && !status) {
                        int st_ = r16_enc_pair(&d, t, i, &xs[lane], &nw);
                        if (st_) { status = st_; bad = i; }
                        else { i--; lane = lane ? lane - 1 : N - 1; }
                    }
                    if (status) break;
                    continue;
                }
#endif
                int st_ = r16_enc_pair(&d, t, i, &xs[lane], &nw);
                if (st_) { status = st_; bad = i; break; }
                i--;
                lane = lane ? lane - 1 : N - 1;
            }
            if (status) break;
            if (interval && cp > 0 && lo == cp && i == cp - 1) {
                if (ncp >= d.rows) { status = 3; break; }
                uint64_t *row = d.cps + ncp * (3 + N);
                row[0] = (uint64_t)cp;
                row[1] = (uint64_t)nw;
                row[2] = 0;
                for (int k = 0; k < N; k++) row[3 + k] = xs[k];
                ncp++;
            }
        }
        /* the flush: x_{N-1} first, x_0 last, each as two words, least significant first */
        for (int k = (int)N - 1; k >= 0 && !status; k--) {
            if (nw + 2 > d.cap) { status = 3; break; }
            d.out[nw++] = (uint16_t)xs[k];
            d.out[nw++] = (uint16_t)(xs[k] >> 16);
        }
        Py_END_ALLOW_THREADS
        res = Py_BuildValue("LLL", (long long)status, (long long)(status == 1 ? bad : nw), (long long)ncp);
        goto out;
    badtab:
        PyErr_SetString(PyExc_ValueError, "rans16_encode: table outside its limits");
    }
out:
    free(vbuf);
    free(vp);
    rel(&s); rel(&e); rel(&rt); rel(&re); rel(&f); rel(&c); rel(&ns); rel(&kb); rel(&nc); rel(&cb); rel(&out);
    rel(&cps);
    return res;
}

/* ============================================================================================== */
/* The AVX2 values decoder of tANS, N = 16 states, 16-bit values: simd_val16 of nativeans.c (see there
 * for the entry layout and the block's steps) in two 8-lane halves, with the 4 bytes of each lane's
 * field gathered from the bit string (AVX2 has no byte permute across the register). */

#ifdef NAS_X86
ATTR_AVX2 INLINE __m256i prefix8(__m256i need) {
    __m256i s = _mm256_add_epi32(need, _mm256_slli_si256(need, 4));
    s = _mm256_add_epi32(s, _mm256_slli_si256(s, 8));
    __m256i tl = _mm256_shuffle_epi32(s, 0xff);
    return _mm256_add_epi32(s, _mm256_permute2x128_si256(tl, tl, 0x08));
}

/* One half block: entries ent, field positions pre (inclusive sums of need, from the block's B); the
 * next states into *x, the values' 32-bit patterns returned; *esc_bad set for an escape index outside
 * its group. */
ATTR_AVX2 INLINE __m256i avx2_half(const uint8_t *wbase, int64_t B7, __m256i ent, __m256i pre, __m256i *x,
                                   const __m256i *k) {
    /* k: 0 m31, 1 m63, 2 m32, 3 m64, 4 expmask, 5 escbit, 6 seven, 7 mmask */
    __m256i need = _mm256_and_si256(ent, k[0]);
    __m256i snb = _mm256_and_si256(_mm256_srli_epi32(ent, 5), k[1]);
    __m256i base = _mm256_srli_epi32(ent, 20);
    __m256i rel = _mm256_sub_epi32(_mm256_set1_epi32((int)B7 + 512), pre);
    __m256i f = _mm256_i32gather_epi32((const int *)wbase, _mm256_srli_epi32(rel, 3), 1);
    f = _mm256_srlv_epi32(f, _mm256_and_si256(rel, k[6]));
    __m256i sneed = _mm256_sub_epi32(k[2], need);
    *x = _mm256_add_epi32(base, _mm256_srlv_epi32(_mm256_sllv_epi32(f, snb), snb));
    __m256i e = _mm256_srlv_epi32(_mm256_sllv_epi32(f, sneed), _mm256_sub_epi32(_mm256_sub_epi32(k[3], need), snb));
    return e;
}
#endif

#ifdef NAS_X86
/* Whether this CPU's gathers are slow: 8 lanes gathered from a table in the first-level cache cost more
 * than 1.5 times 8 scalar loads (microcode runs them on some CPUs, e.g. with Intel's mitigation of Gather
 * Data Sampling: measured ~30 cycles a gather on a Cascade Lake, where the scalar tANS kernel then beats the
 * AVX2 one). Timed once at import, the best of three tries (~10 microseconds). */
static uint32_t probe_tab[256];

ATTR_AVX2 HIDDEN int nas_gathers_slow(void) {
    for (int i = 0; i < 256; i++) probe_tab[i] = (uint32_t)(i * 37) & 255u;
    uint64_t best_g = ~(uint64_t)0, best_s = ~(uint64_t)0;
    volatile uint32_t sink = 0;
    for (int rep = 0; rep < 3; rep++) {
        __m256i idx = _mm256_setr_epi32(0, 9, 18, 27, 36, 45, 54, 63), acc = _mm256_setzero_si256();
        const __m256i step = _mm256_set1_epi32(1), m = _mm256_set1_epi32(255);
        uint64_t t0 = __rdtsc();
        for (int i = 0; i < 256; i++) {
            acc = _mm256_add_epi32(acc, _mm256_i32gather_epi32((const int *)probe_tab, idx, 4));
            idx = _mm256_and_si256(_mm256_add_epi32(idx, step), m);
        }
        uint64_t t1 = __rdtsc();
        uint32_t a = 0;
        for (int i = 0; i < 256; i++) {
            const volatile uint32_t *pt = probe_tab;
            a += pt[i & 255] + pt[(i + 9) & 255] + pt[(i + 18) & 255] + pt[(i + 27) & 255] + pt[(i + 36) & 255] +
                 pt[(i + 45) & 255] + pt[(i + 54) & 255] + pt[(i + 63) & 255];
        }
        uint64_t t2 = __rdtsc();
        sink += (uint32_t)_mm256_extract_epi32(acc, 0) + a;
        if (t1 - t0 < best_g) best_g = t1 - t0;
        if (t2 - t1 < best_s) best_s = t2 - t1;
    }
    (void)sink;
    return 2 * best_g > 3 * best_s;
}

ATTR_AVX2 HIDDEN void nas_avx2_val16(const ValDec *d, const SimdTab *st, SChain **q, int64_t S, uint16_t *out) {
    enum { KMAX = SV_KMAX };
    const uint8_t *p = d->p;
    const int64_t safe_hi = (d->nbytes - 8) * 8;
    __m256i kk[8];
    kk[0] = _mm256_set1_epi32(31); kk[1] = _mm256_set1_epi32(63); kk[2] = _mm256_set1_epi32(32);
    kk[3] = _mm256_set1_epi32(64); kk[4] = _mm256_set1_epi32((int)(0xffu << d->m));
    kk[5] = _mm256_set1_epi32(1 << 19); kk[6] = _mm256_set1_epi32(7); kk[7] = _mm256_set1_epi32((int)lowmask(d->m));
    const __m128i cexp = _mm_cvtsi32_si128(11 - (int)d->m);
    const __m128i cm = _mm_cvtsi32_si128((int)d->m), ctop = _mm_cvtsi32_si128((int)d->top);
    __m256i xl[KMAX], xh[KMAX];
    SRun u[KMAX];
#define SLOT_IN(c)                                                                                    \
    {                                                                                                 \
        xl[c] = _mm256_loadu_si256((const __m256i *)at[c]->X);                                        \
        xh[c] = _mm256_loadu_si256((const __m256i *)(at[c]->X + 8));                                  \
        u[c].r = 0;                                                                                   \
        u[c].fend = -1;                                                                               \
    }
#define SLOT_OUT(c)                                                                                   \
    {                                                                                                 \
        _mm256_storeu_si256((__m256i *)at[c]->X, xl[c]);                                              \
        _mm256_storeu_si256((__m256i *)(at[c]->X + 8), xh[c]);                                        \
    }
    SLOTS_OPEN(KMAX, SLOT_IN)
    for (;;) {
        int active = 0;
        for (int c = 0; c < K; c++) {
            SLOT_VISIT(c, h, SLOT_IN, SLOT_OUT)
            if (u[c].fend < 0 || h->pos >= u[c].fend) {
                if (!srun_enter(d, st, h, &u[c])) continue;
            }
            int64_t B = h->B, pos = h->pos;
            if (UNLIKELY(pos + 16 > u[c].fend || B > safe_hi || B < SV_SAFE_LO)) {
                int64_t upto = pos + 16 > u[c].fend ? u[c].fend : B > safe_hi ? pos + 16 : h->stop;
                _mm256_storeu_si256((__m256i *)h->X, xl[c]);
                _mm256_storeu_si256((__m256i *)(h->X + 8), xh[c]);
                int64_t s = nas_val_dec16(16, d, &h->B, h->X, pos, upto, (void *)(out + pos));
                xl[c] = _mm256_loadu_si256((const __m256i *)h->X);
                xh[c] = _mm256_loadu_si256((const __m256i *)(h->X + 8));
                if (s != -1) { h->status = s; h->done = 1; continue; }
                h->pos = upto;
                continue;
            }
            const unsigned z = u[c].z, wt = d->w - z;
            __m256i entl = _mm256_i32gather_epi32((const int *)u[c].tab, xl[c], 4);
            __m256i enth = _mm256_i32gather_epi32((const int *)u[c].tab, xh[c], 4);
            __m256i prel = prefix8(_mm256_and_si256(entl, kk[0]));
            __m256i preh = prefix8(_mm256_and_si256(enth, kk[0]));
            __m256i carry = _mm256_permutevar8x32_epi32(prel, _mm256_set1_epi32(7));
            preh = _mm256_add_epi32(preh, carry);
            const uint8_t *wbase = p + (B >> 3) - 64;
            _mm_prefetch((const char *)((uintptr_t)wbase - 1024), _MM_HINT_T0); /* as in nas_avx512_val16 */
            __m256i el = avx2_half(wbase, B & 7, entl, prel, &xl[c], kk);
            __m256i eh = avx2_half(wbase, B & 7, enth, preh, &xh[c], kk);
            __m256i hil = _mm256_and_si256(_mm256_srl_epi32(entl, cexp), kk[4]);
            __m256i hih = _mm256_and_si256(_mm256_srl_epi32(enth, cexp), kk[4]);
            __m256i eml = _mm256_cmpeq_epi32(_mm256_and_si256(entl, kk[5]), kk[5]);
            __m256i emh = _mm256_cmpeq_epi32(_mm256_and_si256(enth, kk[5]), kk[5]);
            if (UNLIKELY(!_mm256_testz_si256(_mm256_or_si256(eml, emh), _mm256_or_si256(eml, emh)))) {
                __m128i cwt = _mm_cvtsi32_si128((int)wt);
                __m256i nesc = _mm256_set1_epi32((int)u[c].n_esc), wz = _mm256_set1_epi32((int)lowmask(wt));
                __m256i ixl = _mm256_srl_epi32(el, cwt), ixh = _mm256_srl_epi32(eh, cwt);
                /* ix < 2^25: a signed compare; an index at or past the group's size flags the chain */
                __m256i badl = _mm256_and_si256(eml, _mm256_cmpgt_epi32(_mm256_add_epi32(ixl, _mm256_set1_epi32(1)), nesc));
                __m256i badh = _mm256_and_si256(emh, _mm256_cmpgt_epi32(_mm256_add_epi32(ixh, _mm256_set1_epi32(1)), nesc));
                if (!_mm256_testz_si256(_mm256_or_si256(badl, badh), _mm256_or_si256(badl, badh))) {
                    h->status = -2; h->done = 1; continue;
                }
                hil = _mm256_mask_i32gather_epi32(hil, (const int *)u[c].esc, ixl, eml, 4);
                hih = _mm256_mask_i32gather_epi32(hih, (const int *)u[c].esc, ixh, emh, 4);
                el = _mm256_blendv_epi8(el, _mm256_and_si256(el, wz), eml);
                eh = _mm256_blendv_epi8(eh, _mm256_and_si256(eh, wz), emh);
            }
            __m128i cz = _mm_cvtsi32_si128((int)z);
            __m256i xzl = _mm256_sll_epi32(el, cz), xzh = _mm256_sll_epi32(eh, cz);
            __m256i vl = _mm256_or_si256(_mm256_or_si256(_mm256_sll_epi32(_mm256_srl_epi32(xzl, cm), ctop), hil),
                                         _mm256_and_si256(xzl, kk[7]));
            __m256i vh = _mm256_or_si256(_mm256_or_si256(_mm256_sll_epi32(_mm256_srl_epi32(xzh, cm), ctop), hih),
                                         _mm256_and_si256(xzh, kk[7]));
            __m256i pk = _mm256_permute4x64_epi64(_mm256_packus_epi32(vl, vh), 0xd8);
            _mm256_storeu_si256((__m256i *)(out + pos), pk);
            h->B = B - (int64_t)_mm256_extract_epi32(preh, 7);
            h->pos = pos + 16;
        }
        if (!active) break;
    }
#undef SLOT_IN
#undef SLOT_OUT
}
#else
HIDDEN int nas_gathers_slow(void) { return 1; }

HIDDEN void nas_avx2_val16(const ValDec *d, const SimdTab *st, SChain **q, int64_t S, uint16_t *out) {
    for (int64_t c = 0; c < S; c++) q[c]->status = nas_val_dec16(16, d, &q[c]->B, q[c]->X, q[c]->pos, q[c]->stop,
                                                                 (void *)(out + q[c]->pos));
}
#endif

/* ============================================================================================== */
/* The tANS encoder of N = 16 states (nativeans.c's ENC_STEP, 16 pairs at once). Lane k holds the state
 * that codes pair i - k of each group, as the scalar kernel's Y[k]. A step is the scalar one in every
 * lane: n = (Y + delta) >> 16, the pair's bits (Y mod 2^n, then the k bits of x above them), the next
 * state from the spread, which is the one gather (the symbol's delta, k and base come from register
 * permutes: at most 64 symbols). The bits leave through the same 64-bit accumulator, pair i - 0 first:
 * the bits are the same, only fewer scalar operations stand in the accumulator's serial chain (two
 * pairs merged in a 64-bit lane where they fit 56 bits, one shift, or, add and store for both). */
#ifdef NAS_X86
/* m chunks of bits (ch[q] of cl[q] bits, first in the stream first) into the accumulator, each followed by
 * its store (the chunks are at most 56 bits, so a chunk and the <= 7 bits a store leaves fit 63) */
INLINE void append_chunks(const uint64_t *ch, const uint64_t *cl, const int m, uint64_t *accp, unsigned *cntp,
                          uint8_t **op) {
    uint64_t acc = *accp;
    unsigned cnt = *cntp;
    uint8_t *o = *op;
    for (int q = 0; q < m; q++) {
        acc |= ch[q] << cnt;
        cnt += (unsigned)cl[q];
        memcpy(o, &acc, 8);
        o += cnt >> 3;
        acc >>= (cnt & 56u);
        cnt &= 7u;
    }
    *accp = acc;
    *cntp = cnt;
    *op = o;
}

ATTR_AVX512 HIDDEN int64_t nas_avx512_tans_enc16(const int32_t *tab, int64_t nsym, const uint16_t *encl,
                                                const uint8_t *syms, const uint32_t *exs, int64_t i, int64_t lo,
                                                uint32_t *Y, uint64_t *accp, unsigned *cntp, uint8_t **op,
                                                const uint8_t *out_end, int merge) {
    const __m512i rev = _mm512_set_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i d0 = _mm512_loadu_si512((const void *)(tab + 0)), d1 = _mm512_loadu_si512((const void *)(tab + 16)),
                  d2 = _mm512_loadu_si512((const void *)(tab + 32)), d3 = _mm512_loadu_si512((const void *)(tab + 48));
    const __m512i k0 = _mm512_loadu_si512((const void *)(tab + 64)), k1 = _mm512_loadu_si512((const void *)(tab + 80)),
                  k2 = _mm512_loadu_si512((const void *)(tab + 96)), k3 = _mm512_loadu_si512((const void *)(tab + 112));
    const __m512i b0 = _mm512_loadu_si512((const void *)(tab + 128)), b1 = _mm512_loadu_si512((const void *)(tab + 144)),
                  b2 = _mm512_loadu_si512((const void *)(tab + 160)), b3 = _mm512_loadu_si512((const void *)(tab + 176));
    const __m512i one = _mm512_set1_epi32(1), b32 = _mm512_set1_epi32(32), ns = _mm512_set1_epi32((int)nsym);
    const __m512i lo32 = _mm512_set1_epi64(0xffffffffLL), m16 = _mm512_set1_epi32(0xffff);
    __m512i y = _mm512_loadu_si512((const void *)Y);
    uint64_t acc = *accp;
    unsigned cnt = *cntp;
    uint8_t *o = *op;
    uint64_t ch[16], cl[16];
    while (i - 15 >= lo && out_end - o >= 8 * 18) {
        __m512i sym = _mm512_permutexvar_epi32(rev, _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(syms + i - 15))));
        __m512i x = _mm512_permutexvar_epi32(rev, _mm512_loadu_si512((const void *)(exs + i - 15)));
        __mmask16 hi = _mm512_test_epi32_mask(sym, b32);
        __m512i delta = _mm512_mask_blend_epi32(hi, _mm512_permutex2var_epi32(d0, sym, d1), _mm512_permutex2var_epi32(d2, sym, d3));
        __m512i k = _mm512_mask_blend_epi32(hi, _mm512_permutex2var_epi32(k0, sym, k1), _mm512_permutex2var_epi32(k2, sym, k3));
        __m512i base = _mm512_mask_blend_epi32(hi, _mm512_permutex2var_epi32(b0, sym, b1), _mm512_permutex2var_epi32(b2, sym, b3));
        /* a pair outside its table: the scalar step takes the group and names it */
        if (_mm512_cmpge_epu32_mask(sym, ns) | _mm512_test_epi32_mask(_mm512_srlv_epi32(x, k), _mm512_srlv_epi32(x, k)))
            break;
        __m512i n = _mm512_srli_epi32(_mm512_add_epi32(y, delta), 16);
        __m512i bits = _mm512_or_si512(_mm512_and_si512(y, _mm512_sub_epi32(_mm512_sllv_epi32(one, n), one)),
                                       _mm512_sllv_epi32(x, n));
        __m512i len = _mm512_add_epi32(n, k);
        __m512i j = _mm512_add_epi32(base, _mm512_srlv_epi32(y, n));
        y = _mm512_and_si512(_mm512_i32gather_epi32(j, (const void *)encl, 2), m16);
        if (merge) {
            __m512i el = _mm512_and_si512(len, lo32);
            __m512i c = _mm512_or_si512(_mm512_and_si512(bits, lo32), _mm512_sllv_epi64(_mm512_srli_epi64(bits, 32), el));
            _mm512_storeu_si512((void *)ch, c);
            _mm512_storeu_si512((void *)cl, _mm512_add_epi64(el, _mm512_srli_epi64(len, 32)));
            append_chunks(ch, cl, 8, &acc, &cnt, &o);
        } else {
            _mm512_storeu_si512((void *)ch, _mm512_cvtepu32_epi64(_mm512_castsi512_si256(bits)));
            _mm512_storeu_si512((void *)(ch + 8), _mm512_cvtepu32_epi64(_mm512_extracti64x4_epi64(bits, 1)));
            _mm512_storeu_si512((void *)cl, _mm512_cvtepu32_epi64(_mm512_castsi512_si256(len)));
            _mm512_storeu_si512((void *)(cl + 8), _mm512_cvtepu32_epi64(_mm512_extracti64x4_epi64(len, 1)));
            append_chunks(ch, cl, 16, &acc, &cnt, &o);
        }
        i -= 16;
    }
    _mm512_storeu_si512((void *)Y, y);
    *accp = acc;
    *cntp = cnt;
    *op = o;
    return i;
}
#else
HIDDEN int64_t nas_avx512_tans_enc16(const int32_t *tab, int64_t nsym, const uint16_t *encl, const uint8_t *syms,
                                     const uint32_t *exs, int64_t i, int64_t lo, uint32_t *Y, uint64_t *accp,
                                     unsigned *cntp, uint8_t **op, const uint8_t *out_end, int merge) {
    (void)tab; (void)nsym; (void)encl; (void)syms; (void)exs; (void)lo; (void)Y; (void)accp; (void)cntp; (void)op;
    (void)out_end; (void)merge;
    return i;
}
#endif

/* ============================================================================================== */
/* The AVX-512 F/BW values decoder of tANS, N = 16 states, 16-bit values, tables of L <= 256 states
 * (the default tans8x16): simd_val16 of nativeans.c without its two instructions this CPU class may
 * lack or run slowly. The entry (its own layout, PV_* in nativeans.h: the exponent field already in its
 * place in the value) is not gathered but looked up in registers: the table, padded to 256 entries
 * (SimdTab.tstride), is 8 pairs of registers of 32 entries, each pair one two-register permute
 * (vpermt2d) indexed by the state's low 5 bits, and a tree of blends on state bits 5, 6, 7 picks the
 * pair (fewer pairs for L <= 128, 64, 32). The field of lane k is not cut out
 * with a byte permute (VBMI) but from two dword permutes (vpermd) of two unaligned 64-byte loads 4
 * bytes apart: the dword holding the field's first bit and the next one, shifted together. Escape
 * exponents come from a permute of the table's group padded to 32 (SimdTab.estride; a wider group
 * goes lane by lane). Dependency chain of a block: the lookup, the prefix sum of need, the field
 * reads, the next states; K segments run side by side to overlap them, as in simd_val16. Same
 * values, states, bit positions and statuses as the scalar kernel (tests/test_native_simd.py). */

#ifdef NAS_X86
/* inclusive prefix sum of the 16 lanes: lane shifts by 1, 2, 4, 8 with zeros below */
ATTR_AVX512 INLINE __m512i prefix16(__m512i v) {
    const __m512i zero = _mm512_setzero_si512();
    v = _mm512_add_epi32(v, _mm512_alignr_epi32(v, zero, 15));
    v = _mm512_add_epi32(v, _mm512_alignr_epi32(v, zero, 14));
    v = _mm512_add_epi32(v, _mm512_alignr_epi32(v, zero, 12));
    return _mm512_add_epi32(v, _mm512_alignr_epi32(v, zero, 8));
}

/* keeps a constant in a register (or a stack slot): the compiler would otherwise rebuild it in every block
 * with a broadcast, a port-5 instruction like the permutes that bound the loop */
#define PIN(v) __asm__("" : "+v"(v))

/* The constants of a call (see avx512_val16_body). */
typedef struct {
    __m512i m31, m32, m63, m64, escbit, expm, topm, b32, b64, b128;
    __m128i csg;
    int esc_perm;
} PVk;

/* One block of a chain: pairs pos .. pos + 15 from states *xv and bit position *Bp (both updated) in run
 * u (z shift cz, wt and its mask cwt, wzm); 0, or -2 for an escape index outside its group. */
ATTR_AVX512 INLINE int pv_block(const PVk *k, const uint8_t *p, const SRun *u, __m512i *xv, int64_t *Bp, int64_t pos,
                                __m128i cz, __m512i cwt, __m512i wzm, uint16_t *out, const int G) {
    const int64_t B = *Bp;
    const __m512i x0 = *xv;
    __m512i ent;
    {
        /* the entries: G + 1 levels of lookup, masks by tests on the state bits */
        const uint32_t *t = u->tab;
#define PAIR(g) _mm512_permutex2var_epi32(_mm512_loadu_si512((const void *)(t + 32 * (g))), x0, \
                                          _mm512_loadu_si512((const void *)(t + 32 * (g) + 16)))
        __m512i r0 = PAIR(0);
        if (G == 0) ent = r0;
        else {
            __mmask16 k5 = _mm512_test_epi32_mask(x0, k->b32);
            __m512i a0 = _mm512_mask_blend_epi32(k5, r0, PAIR(1));
            if (G == 1) ent = a0;
            else {
                __mmask16 k6 = _mm512_test_epi32_mask(x0, k->b64);
                __m512i b0 = _mm512_mask_blend_epi32(k6, a0, _mm512_mask_blend_epi32(k5, PAIR(2), PAIR(3)));
                if (G == 2) ent = b0;
                else {
                    __mmask16 k7 = _mm512_test_epi32_mask(x0, k->b128);
                    __m512i b1 = _mm512_mask_blend_epi32(k6, _mm512_mask_blend_epi32(k5, PAIR(4), PAIR(5)),
                                                         _mm512_mask_blend_epi32(k5, PAIR(6), PAIR(7)));
                    ent = _mm512_mask_blend_epi32(k7, b0, b1);
                }
            }
        }
#undef PAIR
    }
    __m512i need = _mm512_and_si512(ent, k->m31);
    __m512i snb = _mm512_and_si512(_mm512_srli_epi32(ent, PV_SNB), k->m63); /* 32 - nb */
    __m512i base = _mm512_srli_epi32(ent, PV_BASE);
    __m512i pre = prefix16(need);
    /* lane k's field is bits [B - pre_k, B - pre_k + need_k); window 0 holds bytes B/8 - 60 .. B/8 + 3
     * (window 1 the same 4 bytes on), so the field starts rel = B % 8 + 480 - pre_k bits into window 0:
     * in its dword rel / 32, at bit rel % 32, and runs on into the next dword, window 1's dword rel / 32
     * (B <= safe_hi: window 1 ends at byte B/8 + 7 < nbytes) */
    const uint8_t *wb = p + (B >> 3) - 60;
    /* the words a few blocks on (downwards; a prefetch never faults, so the address may pass the start) */
    _mm_prefetch((const char *)((uintptr_t)wb - 1024), _MM_HINT_T0);
    __m512i rel = _mm512_sub_epi32(_mm512_set1_epi32((int)(B & 7) + 480), pre);
    __m512i di = _mm512_srli_epi32(rel, 5), sh = _mm512_and_si512(rel, k->m31);
    __m512i lo = _mm512_permutexvar_epi32(di, _mm512_loadu_si512((const void *)wb));
    __m512i up = _mm512_permutexvar_epi32(di, _mm512_loadu_si512((const void *)(wb + 4)));
    /* a shift by 32 (sh = 0) gives 0: the next dword adds nothing then */
    __m512i f = _mm512_or_si512(_mm512_srlv_epi32(lo, sh), _mm512_sllv_epi32(up, _mm512_sub_epi32(k->m32, sh)));
    *xv = _mm512_add_epi32(base, _mm512_srlv_epi32(_mm512_sllv_epi32(f, snb), snb));
    /* the additional data: bits nb .. need - 1 of the field */
    __m512i e = _mm512_srlv_epi32(_mm512_sllv_epi32(f, _mm512_sub_epi32(k->m32, need)),
                                  _mm512_sub_epi32(_mm512_sub_epi32(k->m64, need), snb));
    __m512i hi = ent; /* the exponent field in place, bits m .. top - 1 */
    __mmask16 em = _mm512_test_epi32_mask(ent, k->escbit);
    if (UNLIKELY(em)) {
        /* escape symbols: the exponent comes from the escape index above the w - z data bits */
        __m512i ix = _mm512_srlv_epi32(e, cwt);
        if (_mm512_mask_cmpge_epu32_mask(em, ix, _mm512_set1_epi32((int)u->n_esc))) return -2;
        if (k->esc_perm) {
            __m512i ex = _mm512_permutex2var_epi32(_mm512_loadu_si512((const void *)u->esc), ix,
                                                   _mm512_loadu_si512((const void *)(u->esc + 16)));
            hi = _mm512_mask_mov_epi32(hi, em, ex);
        } else {
            uint32_t ixs[16], his[16];
            _mm512_storeu_si512((void *)ixs, ix);
            _mm512_storeu_si512((void *)his, hi);
            for (unsigned l = em; l; l &= l - 1) {
                int i = __builtin_ctz(l);
                his[i] = u->esc[ixs[i]];
            }
            hi = _mm512_loadu_si512((const void *)his);
        }
        e = _mm512_mask_and_epi32(e, em, e, wzm);
    }
    /* the value: x = e << z (w bits, w <= top); bits 0 .. m - 1 are x's, m .. top - 1 the exponent, top
     * and up x's bits m .. w - 1 (x << (top - m)); two bit selects (a & c | b & ~c) */
    __m512i x = _mm512_sll_epi32(e, cz);
    __m512i v = _mm512_ternarylogic_epi32(hi, x, k->expm, 0xe4);
    v = _mm512_ternarylogic_epi32(_mm512_sll_epi32(x, k->csg), v, k->topm, 0xe4);
    _mm256_storeu_si256((__m256i *)(out + pos), _mm512_cvtepi32_epi16(v));
    *Bp = B - (int64_t)_mm_cvtsi128_si32(_mm512_castsi512_si128(_mm512_alignr_epi32(pre, pre, 15)));
    return 0;
}

/* How many blocks a chain at (B, pos) can run before its run's vector zone ends (pos + 16 > fend) or the
 * window could reach below the words (B < SV_SAFE_LO: a block takes at most 16 * SV_MAXNEED bits); >= 1
 * for a chain that passed the block checks. */
INLINE int64_t pv_blocks_left(int64_t B, int64_t pos, int64_t fend) {
    int64_t a = (fend - pos) >> 4, b = (B - SV_SAFE_LO) / (16 * SV_MAXNEED) + 1;
    return a < b ? a : b;
}

ATTR_AVX512 INLINE void avx512_val16_body(const ValDec *d, const SimdTab *st, SChain **q, int64_t S, uint16_t *out,
                                          const int G) {
    enum { KMAX = SV_KMAX };
    const uint8_t *p = d->p;
    const int64_t safe_hi = (d->nbytes - 8) * 8;
    const unsigned m = d->m, top = d->top;
    PVk k;
    k.m31 = _mm512_set1_epi32(31); k.m32 = _mm512_set1_epi32(32); k.m63 = _mm512_set1_epi32(63);
    k.m64 = _mm512_set1_epi32(64); k.escbit = _mm512_set1_epi32(PV_ESC);
    k.expm = _mm512_set1_epi32((int)(lowmask(top) & ~lowmask(m))); k.topm = _mm512_set1_epi32((int)~lowmask(top));
    k.b32 = _mm512_set1_epi32(32); k.b64 = _mm512_set1_epi32(64); k.b128 = _mm512_set1_epi32(128);
    PIN(k.m31); PIN(k.m32); PIN(k.m63); PIN(k.m64); PIN(k.escbit); PIN(k.expm); PIN(k.topm); PIN(k.b32);
    PIN(k.b64); PIN(k.b128);
    k.csg = _mm_cvtsi32_si128((int)(top - m));
    k.esc_perm = st->estride == 32;
    __m512i xv[KMAX];
    SRun u[KMAX];
    __m128i cz[KMAX];
    __m512i wzmask[KMAX], cwt[KMAX];
#define SLOT_IN(c) { xv[c] = _mm512_loadu_si512((const void *)at[c]->X); u[c].r = 0; u[c].fend = -1; }
#define SLOT_OUT(c) _mm512_storeu_si512((void *)at[c]->X, xv[c])
    SLOTS_OPEN(KMAX, SLOT_IN)
    for (;;) {
        int active = 0, nr = 0, r0 = 0;
        for (int c = 0; c < K; c++) {
            SLOT_VISIT(c, h, SLOT_IN, SLOT_OUT)
            if (u[c].fend < 0 || h->pos >= u[c].fend) {
                if (!srun_enter(d, st, h, &u[c])) continue;
                unsigned z = u[c].z, wt = d->w - z;
                cz[c] = _mm_cvtsi32_si128((int)z);
                cwt[c] = _mm512_set1_epi32((int)wt);
                wzmask[c] = _mm512_set1_epi32((int)lowmask(wt));
            }
            int64_t B = h->B, pos = h->pos;
            if (UNLIKELY(pos + 16 > u[c].fend || B > safe_hi || B < SV_SAFE_LO)) {
                /* the scalar kernel: the rest of the run, the top of the stream, or its bottom */
                int64_t upto = pos + 16 > u[c].fend ? u[c].fend : B > safe_hi ? pos + 16 : h->stop;
                _mm512_storeu_si512((void *)h->X, xv[c]);
                int64_t s = nas_val_dec16(16, d, &h->B, h->X, pos, upto, (void *)(out + pos));
                xv[c] = _mm512_loadu_si512((const void *)h->X);
                if (s != -1) { h->status = s; h->done = 1; continue; }
                h->pos = upto;
                continue;
            }
            if (!nr) { nr = 1; r0 = c; continue; }
            /* two chains ready: their blocks side by side, in registers, for as long as both stay inside
             * their vector zones (one chain's block is a dependency chain about as long as the core can
             * look ahead; two independent ones in one loop fill each other's gaps) */
            nr = 0;
            SChain *ha = at[r0];
            int64_t Ba = ha->B, pa = ha->pos, Bb = B, pb = pos;
            int64_t n = pv_blocks_left(Ba, pa, u[r0].fend), nb_ = pv_blocks_left(Bb, pb, u[c].fend);
            if (nb_ < n) n = nb_;
            __m512i xa = xv[r0], xb = xv[c];
            const __m128i cza = cz[r0], czb = cz[c];
            const __m512i cwa = cwt[r0], cwb = cwt[c], wza = wzmask[r0], wzb = wzmask[c];
            for (int64_t i = 0; i < n; i++) {
                int sa = pv_block(&k, p, &u[r0], &xa, &Ba, pa, cza, cwa, wza, out, G);
                int sb = pv_block(&k, p, &u[c], &xb, &Bb, pb, czb, cwb, wzb, out, G);
                if (UNLIKELY(sa | sb)) {
                    if (sa) { ha->status = -2; ha->done = 1; } else pa += 16;
                    if (sb) { h->status = -2; h->done = 1; } else pb += 16;
                    break;
                }
                pa += 16;
                pb += 16;
            }
            xv[r0] = xa; xv[c] = xb;
            ha->B = Ba; ha->pos = pa; h->B = Bb; h->pos = pb;
        }
        if (nr) {
            /* a chain without a partner this round: its blocks alone */
            SChain *ha = at[r0];
            int64_t Ba = ha->B, pa = ha->pos;
            int64_t n = pv_blocks_left(Ba, pa, u[r0].fend);
            __m512i xa = xv[r0];
            for (int64_t i = 0; i < n; i++) {
                if (UNLIKELY(pv_block(&k, p, &u[r0], &xa, &Ba, pa, cz[r0], cwt[r0], wzmask[r0], out, G))) {
                    ha->status = -2; ha->done = 1;
                    break;
                }
                pa += 16;
            }
            xv[r0] = xa;
            ha->B = Ba; ha->pos = pa;
        }
        if (!active) break;
    }
#undef SLOT_IN
#undef SLOT_OUT
}

ATTR_AVX512 static void avx512_val16_g0(const ValDec *d, const SimdTab *st, SChain **q, int64_t S, uint16_t *out) {
    avx512_val16_body(d, st, q, S, out, 0);
}
ATTR_AVX512 static void avx512_val16_g1(const ValDec *d, const SimdTab *st, SChain **q, int64_t S, uint16_t *out) {
    avx512_val16_body(d, st, q, S, out, 1);
}
ATTR_AVX512 static void avx512_val16_g2(const ValDec *d, const SimdTab *st, SChain **q, int64_t S, uint16_t *out) {
    avx512_val16_body(d, st, q, S, out, 2);
}
ATTR_AVX512 static void avx512_val16_g3(const ValDec *d, const SimdTab *st, SChain **q, int64_t S, uint16_t *out) {
    avx512_val16_body(d, st, q, S, out, 3);
}

HIDDEN void nas_avx512_val16(const ValDec *d, const SimdTab *st, SChain **q, int64_t S, uint16_t *out) {
    (d->L <= 32 ? avx512_val16_g0 : d->L <= 64 ? avx512_val16_g1 : d->L <= 128 ? avx512_val16_g2 : avx512_val16_g3)(
        d, st, q, S, out);
}
#else
HIDDEN void nas_avx512_val16(const ValDec *d, const SimdTab *st, SChain **q, int64_t S, uint16_t *out) {
    for (int64_t c = 0; c < S; c++) q[c]->status = nas_val_dec16(16, d, &q[c]->B, q[c]->X, q[c]->pos, q[c]->stop,
                                                                 (void *)(out + q[c]->pos));
}
#endif
