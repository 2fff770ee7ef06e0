/* A tensor's code table in compiled code: the minimum-cost normalization of probability.py
 * (normalize_counts) and the escape search of codetable.py (build_code_table), which are their reference.
 *
 * Why here: building the tables was half of a whole-model encode in the default format (MiniLM bf16: about
 * 60 of 130 ms with rans16x16, 100 of 235 with tans8x16), Python and NumPy calls over arrays of 30 to 60
 * codes. Here it is microseconds a tensor.
 *
 * The same floats as the reference. Every logarithm comes from the caller, computed by NumPy's log2
 * (the table T of log2(0 .. 2^P + 1) for the frequencies, log2 of the counts and of the escape groups'
 * sums), since NumPy's vectorized log2 and the C library's differ in the last bit for about one integer
 * in 20,000. The sums are NumPy's pairwise summation (pairwise_sum below, as numpy's
 * `DOUBLE_pairwise_sum`), and every other operation is one IEEE operation in the reference's order, so
 * each comparison sees the reference's values and the tables are the same, tie for tie.
 */
#include "nativeans.h"

/* numpy's pairwise sum of n doubles: sequential below 8, eight accumulators up to 128, halves above */
static double pairwise_sum(const double *a, int64_t n) {
    if (n < 8) {
        double res = 0.;
        for (int64_t i = 0; i < n; i++) res += a[i];
        return res;
    }
    if (n <= 128) {
        double r[8];
        for (int j = 0; j < 8; j++) r[j] = a[j];
        int64_t i;
        for (i = 8; i < n - (n % 8); i += 8)
            for (int j = 0; j < 8; j++) r[j] += a[i + j];
        double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++) res += a[i];
        return res;
    }
    int64_t n2 = n / 2;
    n2 -= n2 % 8;
    return pairwise_sum(a, n2) + pairwise_sum(a + n2, n - n2);
}

typedef struct {
    const double *T; /* log2 of 0 .. 2^P + 1 */
    int P;
    double *w, *g, *d, *tmp; /* n each */
    int64_t *idx;            /* n */
} Norm;

/* idx[0 .. n-1] ordered by key descending, ties by index: the reference's stable argsort of -key
 * (insertion sort: n is an alphabet, at most a few hundred) */
static void order_by_key(int64_t *idx, const double *key, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        int64_t j = i;
        while (j > 0 && key[idx[j - 1]] < key[i]) {
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = i;
    }
}

static int64_t bit_length(int64_t v) {
    int64_t b = 0;
    for (; v > 0; v >>= 1) b++;
    return b;
}

static void gains(const Norm *z, const int64_t *f, int64_t n) {
    for (int64_t i = 0; i < n; i++) z->g[i] = z->w[i] * (z->T[f[i] + 1] - z->T[f[i]]);
}

static void losses(const Norm *z, const int64_t *f, int64_t n) {
    for (int64_t i = 0; i < n; i++) z->d[i] = f[i] > 1 ? z->w[i] * (z->T[f[i]] - z->T[f[i] - 1]) : INFINITY;
}

/* normalize_counts of counts c[0 .. n-1], every one > 0, n <= 2^P; frequencies into f */
static void normalize(const Norm *z, const int64_t *c, int64_t n, int64_t *f) {
    const int64_t total_freq = (int64_t)1 << z->P;
    for (int64_t i = 0; i < n; i++) z->w[i] = (double)c[i];
    const double s = pairwise_sum(z->w, n);
    int64_t sum = 0;
    for (int64_t i = 0; i < n; i++) {
        double v = floor(z->w[i] * (double)total_freq / s);
        f[i] = v < 1.0 ? 1 : (int64_t)v;
        sum += f[i];
    }
    int64_t deficit = total_freq - sum;
    while (deficit > 0) {
        gains(z, f, n);
        int64_t k = deficit / 4 > 1 ? deficit / 4 : 1;
        if (k > deficit) k = deficit;
        if (k > n) k = n;
        order_by_key(z->idx, z->g, n);
        for (int64_t i = 0; i < k; i++) f[z->idx[i]] += 1;
        deficit -= k;
    }
    while (deficit < 0) {
        losses(z, f, n);
        int64_t j = 0;
        for (int64_t i = 1; i < n; i++)
            if (z->d[i] < z->d[j]) j = i;
        f[j] -= 1;
        deficit += 1;
    }
    for (;;) {
        gains(z, f, n);
        losses(z, f, n);
        int64_t i = 0, j = 0;
        for (int64_t t = 1; t < n; t++) {
            if (z->g[t] > z->g[i]) i = t;
            if (z->d[t] < z->d[j]) j = t;
        }
        if (i == j || !(z->g[i] > z->d[j] * (1 + 1e-12))) break;
        f[i] += 1;
        f[j] -= 1;
    }
}

static int norm_alloc(Norm *z, int64_t n) {
    z->w = (double *)malloc((size_t)(4 * n + 1) * sizeof(double));
    z->idx = (int64_t *)malloc((size_t)(n + 1) * sizeof(int64_t));
    if (!z->w || !z->idx) {
        free(z->w);
        free(z->idx);
        return -1;
    }
    z->g = z->w + n;
    z->d = z->g + n;
    z->tmp = z->d + n;
    return 0;
}

static int check_log_table(const Buf *tb, int P) {
    if (P < 1 || P > 24 || NITEMS(*tb) < ((int64_t)1 << P) + 2) {
        PyErr_SetString(PyExc_ValueError, "the log2 table must hold log2(0 .. 2**P + 1)");
        return -1;
    }
    return 0;
}

/* normalize(counts int64[n] (all > 0), log2 table, P) -> bytes of int64[n] */
HIDDEN PyObject *nas_py_normalize(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *oc, *ot;
    int P;
    if (!PyArg_ParseTuple(args, "OOi", &oc, &ot, &P)) return NULL;
    Buf cb = {0}, tb = {0};
    PyObject *res = NULL;
    Norm z = {0};
    if (get_buf(oc, &cb, 0, 8, "counts") || get_buf(ot, &tb, 0, 8, "log2 table") || check_log_table(&tb, P)) goto out;
    {
        int64_t n = NITEMS(cb);
        const int64_t *c = (const int64_t *)cb.view.buf;
        if (n < 1 || n > ((int64_t)1 << P)) {
            PyErr_SetString(PyExc_ValueError, "normalize: 1 to 2**P counts");
            goto out;
        }
        for (int64_t i = 0; i < n; i++)
            if (c[i] < 1) {
                PyErr_SetString(PyExc_ValueError, "normalize: every count must be positive");
                goto out;
            }
        if (norm_alloc(&z, n)) { PyErr_NoMemory(); goto out; }
        z.T = (const double *)tb.view.buf;
        z.P = P;
        res = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(n * 8));
        if (!res) goto out;
        normalize(&z, c, n, (int64_t *)PyBytes_AS_STRING(res));
    }
out:
    free(z.w);
    free(z.idx);
    rel(&cb);
    rel(&tb);
    return res;
}

/* The escape search of build_code_table (codetable.py, the reference, which states the rules).
 *
 * code_table_search(order, counts, log2_counts, log2_groups, log2 table, log2_total, P, extra_bits,
 *                   max_extra_bits, capacity, escape) -> (n_direct, bytes of the frequencies) or None
 *
 * order: the n occurring codes, most frequent first (ties by code); counts, log2_counts: per code (int64,
 * float64); log2_groups[k]: log2 of the summed counts of order[k:], the escape group when k codes are
 * direct; log2_total: log2 of all counts (the reference's math.log2). The direct symbols of a split are
 * its codes in ascending order, then the escape symbol, as the reference builds them. */
HIDDEN PyObject *nas_py_code_table_search(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *oo, *oc, *olc, *olg, *ot;
    double log2_total;
    int P, extra_bits, max_extra_bits, capacity, escape;
    if (!PyArg_ParseTuple(args, "OOOOOdiiiip", &oo, &oc, &olc, &olg, &ot, &log2_total, &P, &extra_bits,
                          &max_extra_bits, &capacity, &escape))
        return NULL;
    Buf ob = {0}, cb = {0}, lcb = {0}, lgb = {0}, tb = {0};
    PyObject *res = NULL;
    Norm z = {0};
    int64_t *sc = NULL, *freqs = NULL, *best_f = NULL;
    double *xs = NULL;
    uint8_t *direct = NULL;
    if (get_buf(oo, &ob, 0, 8, "order") || get_buf(oc, &cb, 0, 8, "counts") || get_buf(olc, &lcb, 0, 8, "log2 counts") ||
        get_buf(olg, &lgb, 0, 8, "log2 groups") || get_buf(ot, &tb, 0, 8, "log2 table") || check_log_table(&tb, P))
        goto out;
    {
        const int64_t n = NITEMS(ob), ncodes = NITEMS(cb);
        const int64_t *order = (const int64_t *)ob.view.buf, *counts = (const int64_t *)cb.view.buf;
        const double *lc = (const double *)lcb.view.buf, *lg = (const double *)lgb.view.buf, *T = (const double *)tb.view.buf;
        if (n < 1 || NITEMS(lcb) != ncodes || NITEMS(lgb) != n + 1 || capacity < 1 || capacity > ((int64_t)1 << P)) {
            PyErr_SetString(PyExc_ValueError, "code_table_search: inconsistent arguments");
            goto out;
        }
        for (int64_t k = 0; k < n; k++)
            if (order[k] < 0 || order[k] >= ncodes || counts[order[k]] < 1) {
                PyErr_SetString(PyExc_ValueError, "code_table_search: order names a code that does not occur");
                goto out;
            }
        sc = (int64_t *)malloc((size_t)(n + 1) * sizeof(int64_t));
        freqs = (int64_t *)malloc((size_t)(n + 1) * sizeof(int64_t));
        best_f = (int64_t *)malloc((size_t)(n + 1) * sizeof(int64_t));
        xs = (double *)malloc((size_t)(n + 1) * sizeof(double));
        direct = (uint8_t *)calloc((size_t)ncodes, 1);
        if (!sc || !freqs || !best_f || !xs || !direct || norm_alloc(&z, n + 1)) { PyErr_NoMemory(); goto out; }
        z.T = T;
        z.P = P;
        for (int64_t k = 0; k < n; k++) direct[order[k]] = 1;
        int64_t group_sum = 0, best_nd = -1, best_m = 0;
        double best_cost = 0.0;
        /* n_direct from n down to 0; the group is order[n_direct:], its sum kept as the split moves */
        for (int64_t nd = n; nd >= 0; nd--) {
            if (nd < n) {
                direct[order[nd]] = 0;
                group_sum += counts[order[nd]];
            }
            const int64_t ng = n - nd;
            if (ng == 1 || (nd == 0 && n > 1 && ng == 0)) continue;
            if (ng && !escape) break;
            const int64_t n_sym = nd + (ng ? 1 : 0);
            if (n_sym > capacity) continue;
            const int64_t index_bits = ng ? bit_length(ng - 1) : 0;
            if (extra_bits + index_bits > max_extra_bits) continue;
            /* sc: the direct codes' counts in code order, then the group's sum; xs[i] = log2(sc[i]) */
            int64_t m = 0;
            for (int64_t code = 0; code < ncodes && m < nd; code++)
                if (direct[code]) {
                    sc[m] = counts[code];
                    xs[m] = lc[code];
                    m++;
                }
            if (ng) {
                sc[m] = group_sum;
                xs[m] = lg[nd];
                m++;
            }
            if (best_nd >= 0) { /* the reference's pruning by the ideal cost (Gibbs' inequality) */
                for (int64_t i = 0; i < m; i++) z.tmp[i] = (double)sc[i] * (log2_total - xs[i]);
                double ideal = pairwise_sum(z.tmp, m);
                if (ng) ideal += (double)(sc[m - 1] * index_bits);
                if (ideal > best_cost * (1 + 1e-9) + 1e-6) continue;
            }
            normalize(&z, sc, m, freqs);
            for (int64_t i = 0; i < m; i++) z.tmp[i] = (double)sc[i] * ((double)P - T[freqs[i]]);
            double cost = pairwise_sum(z.tmp, m);
            if (ng) cost += (double)(sc[m - 1] * index_bits);
            if (best_nd < 0 || cost < best_cost - 1e-9) {
                best_cost = cost;
                best_nd = nd;
                best_m = m;
                memcpy(best_f, freqs, (size_t)m * sizeof(int64_t));
            }
            if (!escape) break;
        }
        if (best_nd < 0) {
            Py_INCREF(Py_None);
            res = Py_None;
        } else
            res = Py_BuildValue("(Ly#)", (long long)best_nd, (const char *)best_f, (Py_ssize_t)(best_m * 8));
    }
out:
    free(sc);
    free(freqs);
    free(best_f);
    free(xs);
    free(direct);
    free(z.w);
    free(z.idx);
    rel(&ob);
    rel(&cb);
    rel(&lcb);
    rel(&lgb);
    rel(&tb);
    return res;
}
