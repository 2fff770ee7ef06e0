/* The container's block CRC (docs/bitstream.md §6): zlib's CRC-32 (ISO-HDLC: reflected polynomial
 * 0xEDB88320, init and final XOR 0xFFFFFFFF) over a block's W-bit words in decoding order, address hi - 1
 * first, each word's W / 8 bytes little-endian: what a decoder core computes on its word input.
 *
 * Why here: a whole-model decode checks every block, and zlib's table CRC over a reversed copy of the words
 * cost as much as the tANS decode itself (15 ms of 72 on MiniLM bf16, 30 MB of words). With PCLMULQDQ the
 * words are folded 64 bytes at a time straight from the stack, reversed in registers (one byte shuffle per
 * 16 bytes): no copy. CPUs without it (and other compilers) take the byte-wise loop below, which is exact
 * and slower; `crc32_words` says which ran.
 *
 * Folding (reflected CRC, as in Intel's "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ").
 * A 16-byte block A of the message, loaded little-endian, holds its first 8 bytes (the highest-degree
 * coefficients) in its low quadword. Moving A d bits later in the message multiplies it by x^d; modulo
 * P that is lo * (x^(d+32) mod P) + hi * (x^(d-32) mod P) in the reflected domain, each constant stored
 * bit-reflected over 32 bits and shifted left once (the carry-less product of two reflected operands
 * lands one bit low). The constants are computed at import from P (crc_init), not typed in. After the
 * folds, the last 16-byte remainder and the message's tail bytes (< 16) are run through the byte-wise
 * CRC from a zero register: leading zeros do not change a CRC register that starts at zero, so the
 * folded message and the remainder have the same CRC.
 */
#include "nativeans.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>
#define HAVE_CLMUL_PATH 1
#define ATTR_CLMUL __attribute__((target("pclmul,sse4.1,ssse3")))
#define ATTR_VCLMUL __attribute__((target("avx512f,avx512bw,vpclmulqdq,pclmul,sse4.1,ssse3")))
#endif

static uint32_t crc_table[256];
/* reflected x^n mod P, << 1, for a fold by d bits: n = d + 32 (low quadword) and d - 32 (high) */
static uint64_t k_fold64_lo, k_fold64_hi, k_fold16_lo, k_fold16_hi;
/* the 512-bit path (VPCLMULQDQ): fold by 256 bytes, and the four lanes of one register folded by 48, 32 and
 * 16 bytes into the last */
static uint64_t k_fold256_lo, k_fold256_hi, k_fold48_lo, k_fold48_hi, k_fold32_lo, k_fold32_hi;
/* 0: byte-wise; 1: 128-bit folds (PCLMULQDQ); 2: 512-bit folds (VPCLMULQDQ with AVX-512) first */
static int have_clmul = 0, cpu_clmul = 0;

/* x^n mod P in the normal (unreflected) representation: P = x^32 + 0x04C11DB7 */
static uint32_t xpow_mod(unsigned n) {
    uint32_t r = 1;
    for (unsigned i = 0; i < n; i++) r = (r & 0x80000000u) ? (r << 1) ^ 0x04C11DB7u : r << 1;
    return r;
}

static uint32_t reflect32(uint32_t v) {
    uint32_t r = 0;
    for (int i = 0; i < 32; i++) r |= ((v >> i) & 1u) << (31 - i);
    return r;
}

static uint64_t fold_constant(unsigned n) { return (uint64_t)reflect32(xpow_mod(n)) << 1; }

HIDDEN void nas_crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1u) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
        crc_table[i] = c;
    }
    k_fold64_lo = fold_constant(4 * 128 + 32);
    k_fold64_hi = fold_constant(4 * 128 - 32);
    k_fold16_lo = fold_constant(128 + 32);
    k_fold16_hi = fold_constant(128 - 32);
    k_fold256_lo = fold_constant(16 * 128 + 32);
    k_fold256_hi = fold_constant(16 * 128 - 32);
    k_fold48_lo = fold_constant(3 * 128 + 32);
    k_fold48_hi = fold_constant(3 * 128 - 32);
    k_fold32_lo = fold_constant(2 * 128 + 32);
    k_fold32_hi = fold_constant(2 * 128 - 32);
#ifdef HAVE_CLMUL_PATH
    __builtin_cpu_init();
    if (__builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1") && __builtin_cpu_supports("ssse3")) {
        cpu_clmul = 1;
        if (__builtin_cpu_supports("vpclmulqdq") && __builtin_cpu_supports("avx512f") &&
            __builtin_cpu_supports("avx512bw"))
            cpu_clmul = 2;
    }
#endif
    have_clmul = cpu_clmul;
}

/* the raw (uninverted) register after the bytes of words[lo .. hi) in decoding order */
static uint32_t crc_bytes_rev(uint32_t reg, const uint8_t *w, int64_t lo, int64_t hi, int wb) {
    for (int64_t a = hi - 1; a >= lo; a--)
        for (int k = 0; k < wb; k++) reg = crc_table[(reg ^ w[a * wb + k]) & 0xffu] ^ (reg >> 8);
    return reg;
}

#ifdef HAVE_CLMUL_PATH
/* the 16 bytes of words [a - 16 / wb, a) in decoding order */
ATTR_CLMUL static inline __m128i load_rev(const uint8_t *w, int64_t a, int wb, __m128i rev) {
    return _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(w + a * wb - 16)), rev);
}

ATTR_CLMUL static inline __m128i fold(__m128i acc, __m128i k, __m128i next) {
    return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(acc, k, 0x00), _mm_clmulepi64_si128(acc, k, 0x11)), next);
}

/* the byte shuffle that puts 16 bytes of wb-byte words in decoding order: the words reversed, their bytes not */
ATTR_CLMUL static inline __m128i rev_shuffle(int wb) {
    return wb == 1 ? _mm_setr_epi8(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
         : wb == 2 ? _mm_setr_epi8(14, 15, 12, 13, 10, 11, 8, 9, 6, 7, 4, 5, 2, 3, 0, 1)
                   : _mm_setr_epi8(12, 13, 14, 15, 8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3);
}

/* the 64 bytes of words [a - 64 / wb, a) in decoding order: each 16-byte lane reversed, then the lanes */
ATTR_VCLMUL static inline __m512i load_rev64(const uint8_t *w, int64_t a, int wb, __m512i rev) {
    __m512i v = _mm512_shuffle_epi8(_mm512_loadu_si512((const void *)(w + a * wb - 64)), rev);
    return _mm512_shuffle_i64x2(v, v, 0x1B);
}

ATTR_VCLMUL static inline __m512i fold512(__m512i acc, __m512i k, __m512i next) {
    return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(acc, k, 0x00), _mm512_clmulepi64_epi128(acc, k, 0x11),
                                     next, 0x96);
}

/* The 512-bit folds over the first 256 * j bytes of words[lo .. hi) (at least 256 of them): the 128-bit
 * remainder to go on from and, in *ap, the address below the words consumed */
ATTR_VCLMUL static __m128i fold_zmm(uint32_t reg, const uint8_t *w, int64_t lo, int64_t hi, int wb, int64_t *ap) {
    const __m512i rev = _mm512_broadcast_i32x4(rev_shuffle(wb));
    const int64_t per = 64 / wb; /* words per 64 bytes */
    const __m512i k256 = _mm512_set_epi64((long long)k_fold256_hi, (long long)k_fold256_lo, (long long)k_fold256_hi,
                                          (long long)k_fold256_lo, (long long)k_fold256_hi, (long long)k_fold256_lo,
                                          (long long)k_fold256_hi, (long long)k_fold256_lo);
    const __m512i k64 = _mm512_set_epi64((long long)k_fold64_hi, (long long)k_fold64_lo, (long long)k_fold64_hi,
                                         (long long)k_fold64_lo, (long long)k_fold64_hi, (long long)k_fold64_lo,
                                         (long long)k_fold64_hi, (long long)k_fold64_lo);
    int64_t a = hi;
    __m512i x0 = load_rev64(w, a, wb, rev), x1 = load_rev64(w, a - per, wb, rev);
    __m512i x2 = load_rev64(w, a - 2 * per, wb, rev), x3 = load_rev64(w, a - 3 * per, wb, rev);
    a -= 4 * per;
    x0 = _mm512_xor_si512(x0, _mm512_zextsi128_si512(_mm_cvtsi32_si128((int)reg)));
    while (a - 4 * per >= lo) {
        x0 = fold512(x0, k256, load_rev64(w, a, wb, rev));
        x1 = fold512(x1, k256, load_rev64(w, a - per, wb, rev));
        x2 = fold512(x2, k256, load_rev64(w, a - 2 * per, wb, rev));
        x3 = fold512(x3, k256, load_rev64(w, a - 3 * per, wb, rev));
        a -= 4 * per;
    }
    x0 = fold512(fold512(fold512(x0, k64, x1), k64, x2), k64, x3);
    /* lanes 0, 1, 2 (earliest first) are 48, 32 and 16 bytes before lane 3 */
    const __m512i klanes = _mm512_set_epi64(0, 0, (long long)k_fold16_hi, (long long)k_fold16_lo,
                                            (long long)k_fold32_hi, (long long)k_fold32_lo, (long long)k_fold48_hi,
                                            (long long)k_fold48_lo);
    __m512i t = _mm512_xor_si512(_mm512_clmulepi64_epi128(x0, klanes, 0x00), _mm512_clmulepi64_epi128(x0, klanes, 0x11));
    __m128i r = _mm_xor_si128(_mm_xor_si128(_mm512_extracti32x4_epi32(t, 0), _mm512_extracti32x4_epi32(t, 1)),
                              _mm_xor_si128(_mm512_extracti32x4_epi32(t, 2), _mm512_extracti32x4_epi32(x0, 3)));
    *ap = a;
    return r;
}

/* raw register after words[lo .. hi) (hi - lo >= 64 / wb words), starting from register reg */
ATTR_CLMUL static uint32_t crc_clmul_rev(uint32_t reg, const uint8_t *w, int64_t lo, int64_t hi, int wb) {
    /* byte shuffles that put 16 bytes of words in decoding order: the words reversed, their bytes not */
    const __m128i rev = rev_shuffle(wb);
    const int64_t per = 16 / wb; /* words per 16 bytes */
    const __m128i k64 = _mm_set_epi64x((long long)k_fold64_hi, (long long)k_fold64_lo);
    const __m128i k16 = _mm_set_epi64x((long long)k_fold16_hi, (long long)k_fold16_lo);
    int64_t a = hi;
    __m128i x0;
    if (have_clmul >= 2 && (hi - lo) * wb >= 256) {
        x0 = fold_zmm(reg, w, lo, hi, wb, &a);
        goto singles;
    }
    x0 = load_rev(w, a, wb, rev);
    __m128i x1 = load_rev(w, a - per, wb, rev);
    __m128i x2 = load_rev(w, a - 2 * per, wb, rev), x3 = load_rev(w, a - 3 * per, wb, rev);
    a -= 4 * per;
    x0 = _mm_xor_si128(x0, _mm_cvtsi32_si128((int)reg)); /* the register enters with the first 4 bytes */
    while (a - 4 * per >= lo) {
        x0 = fold(x0, k64, load_rev(w, a, wb, rev));
        x1 = fold(x1, k64, load_rev(w, a - per, wb, rev));
        x2 = fold(x2, k64, load_rev(w, a - 2 * per, wb, rev));
        x3 = fold(x3, k64, load_rev(w, a - 3 * per, wb, rev));
        a -= 4 * per;
    }
    x0 = fold(fold(fold(x0, k16, x1), k16, x2), k16, x3);
singles:
    while (a - per >= lo) {
        x0 = fold(x0, k16, load_rev(w, a, wb, rev));
        a -= per;
    }
    uint8_t rem[16];
    _mm_storeu_si128((__m128i *)rem, x0);
    uint32_t r = 0;
    for (int i = 0; i < 16; i++) r = crc_table[(r ^ rem[i]) & 0xffu] ^ (r >> 8);
    return crc_bytes_rev(r, w, lo, a, wb);
}
#endif

/* zlib's crc32 of words[lo .. hi) in decoding order */
static uint32_t crc_words(const uint8_t *w, int64_t lo, int64_t hi, int wb) {
    uint32_t reg = 0xFFFFFFFFu;
#ifdef HAVE_CLMUL_PATH
    if (have_clmul && (hi - lo) * wb >= 64) return ~crc_clmul_rev(reg, w, lo, hi, wb);
#endif
    return ~crc_bytes_rev(reg, w, lo, hi, wb);
}

/* crc32_blocks(words, los, his, out) -> the path that ran (crc32_path's levels): out[i] = zlib's CRC-32 of
 * words[los[i] .. his[i]) in decoding order (address his[i] - 1 first, each word's bytes little-endian),
 * words' item size 1, 2 or 4 (any other width is the Python side's); every range
 * checked against the words. */
HIDDEN PyObject *nas_py_crc32_blocks(PyObject *self, PyObject *args) {
    PyObject *wo, *loo, *hio, *outo;
    if (!PyArg_ParseTuple(args, "OOOO", &wo, &loo, &hio, &outo)) return NULL;
    Buf w, lo, hi, out;
    PyObject *res = NULL;
    w.held = lo.held = hi.held = out.held = 0;
    if (get_buf(wo, &w, 0, 0, "crc32_blocks words") < 0 || get_buf(loo, &lo, 0, 8, "crc32_blocks los") < 0 ||
        get_buf(hio, &hi, 0, 8, "crc32_blocks his") < 0 || get_buf(outo, &out, 1, 8, "crc32_blocks out") < 0)
        goto done;
    int wb = (int)w.view.itemsize;
    int64_t nw = NITEMS(w), nb = NITEMS(lo);
    if ((wb != 1 && wb != 2 && wb != 4) || NITEMS(hi) != nb || NITEMS(out) != nb) {
        PyErr_SetString(PyExc_ValueError, "crc32_blocks: words of 1, 2 or 4 bytes and one lo, hi and out per block");
        goto done;
    }
    const int64_t *l = (const int64_t *)lo.view.buf, *h = (const int64_t *)hi.view.buf;
    for (int64_t i = 0; i < nb; i++)
        if (l[i] < 0 || h[i] < l[i] || h[i] > nw) {
            PyErr_Format(PyExc_ValueError, "crc32_blocks: block %lld's words %lld..%lld outside the %lld words",
                         (long long)i, (long long)l[i], (long long)h[i], (long long)nw);
            goto done;
        }
    uint64_t *o = (uint64_t *)out.view.buf;
    const uint8_t *p = (const uint8_t *)w.view.buf;
    Py_BEGIN_ALLOW_THREADS
    for (int64_t i = 0; i < nb; i++) o[i] = crc_words(p, l[i], h[i], wb);
    Py_END_ALLOW_THREADS
    res = PyLong_FromLong(have_clmul);
done:
    rel(&w); rel(&lo); rel(&hi); rel(&out);
    return res;
}

/* crc32_path(level) -> the path in use after the call: -1 asks; 0 byte-wise, 1 128-bit folds (PCLMULQDQ), 2
 * 512-bit folds first (VPCLMULQDQ), each capped at what the CPU has (tests compare them) */
HIDDEN PyObject *nas_py_crc32_path(PyObject *self, PyObject *args) {
    int level;
    if (!PyArg_ParseTuple(args, "i", &level)) return NULL;
    if (level >= 0) have_clmul = level < cpu_clmul ? level : cpu_clmul;
    return PyLong_FromLong(have_clmul);
}
