"""Independent reference values for crates/stats/tests/reference.rs.

Run once with SciPy 1.17.1, NumPy, statsmodels (pip install scipy statsmodels);
the printed numbers were pasted into reference.rs. Nothing here calls wattio code.
The exact Hodges–Lehmann confidence interval is computed by brute-force enumeration
of all C(m+n, m) rank assignments (no shortcut shared with the Rust code).
"""
import itertools, math
import numpy as np
from scipy import stats
from statsmodels.stats.multitest import multipletests

def mwu(x, y, alt, method, cc=True):
    r = stats.mannwhitneyu(x, y, alternative=alt, method=method, use_continuity=cc)
    return r.statistic, r.pvalue

print("== R ?wilcox.test example (Hollander & Wolfe 1973, p. 69)")
x = [0.80, 0.83, 1.89, 1.04, 1.45, 1.38, 1.91, 1.64, 0.73, 1.46]
y = [1.15, 0.88, 0.90, 0.74, 1.21]
for alt in ["greater", "less", "two-sided"]:
    print(alt, "exact", mwu(x, y, alt, "exact"))
    print(alt, "asym cc", mwu(x, y, alt, "asymptotic"))
    print(alt, "asym nocc", mwu(x, y, alt, "asymptotic", cc=False))

print("== ties")
xt = [1, 2, 2, 3, 4, 5, 5, 5]
yt = [2, 3, 3, 6, 7, 8, 9, 5, 10]
for alt in ["greater", "less", "two-sided"]:
    print(alt, "asym cc", mwu(xt, yt, alt, "asymptotic"))

print("== larger samples, no ties (exact and normal)")
rng = np.random.default_rng(20261122)
xl = np.round(rng.normal(10.3, 1.0, 30), 4)
yl = np.round(rng.normal(10.0, 1.0, 25), 4)
assert len(set(xl) | set(yl)) == 55
print("xl", [float(v) for v in xl])
print("yl", [float(v) for v in yl])
for alt in ["greater", "two-sided"]:
    print(alt, "exact", mwu(xl, yl, alt, "exact"))
    print(alt, "asym cc", mwu(xl, yl, alt, "asymptotic"))

print("== extreme exact tail: complete separation m=12 n=10")
xs = list(range(100, 112)); ys = list(range(0, 10))
print("greater exact", mwu(xs, ys, "greater", "exact"), "1/C(22,10)=", 1 / math.comb(22, 10))

print("== Hodges-Lehmann (median of pairwise differences) + exact CI by enumeration")
def hl(x, y):
    return float(np.median([a - b for a in x for b in y]))
def exact_u_cdf(m, n):
    # distribution of U = #(x_i > y_j) by enumerating which ranks x gets
    counts = {}
    for comb in itertools.combinations(range(m + n), m):
        u = sum(r for r in comb) - m * (m - 1) // 2
        counts[u] = counts.get(u, 0) + 1
    tot = math.comb(m + n, m)
    cdf, acc = {}, 0
    for u in range(m * n + 1):
        acc += counts.get(u, 0); cdf[u] = acc / tot
    return cdf
def exact_ci(x, y, conf):
    m, n = len(x), len(y)
    cdf = exact_u_cdf(m, n)
    alpha = 1 - conf
    # R's qwilcox(alpha/2): smallest q with P(U <= q) >= alpha/2
    qu = next(q for q in range(m * n + 1) if cdf[q] >= alpha / 2)
    if qu == 0: qu = 1
    ql = m * n - qu
    d = sorted(a - b for a in x for b in y)
    achieved = 1 - 2 * cdf[qu - 1]
    return d[qu - 1], d[ql], achieved
print("HL x,y", hl(x, y), "CI95", exact_ci(x, y, 0.95))
xa = [2.1, 3.4, 1.9, 5.6, 4.4, 3.3]
ya = [1.2, 0.7, 2.8, 1.5, 0.4, 2.2, 1.0]
print("HL xa,ya", hl(xa, ya), "CI90", exact_ci(xa, ya, 0.90), "CI95", exact_ci(xa, ya, 0.95))

print("== Holm-Bonferroni (statsmodels multipletests method='holm')")
ps = [0.01, 0.04, 0.03, 0.005, 0.5, 0.0001]
print(ps, list(multipletests(ps, method="holm")[1]))

print("== quantiles, NumPy default = R type 7")
q = [3.1, 0.2, 7.7, 4.4, 4.4, 9.0, 1.5]
for p in [0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0]:
    print(p, np.quantile(q, p))
print("median even", np.median([4.0, 1.0, 3.0, 2.0]))

print("== Hodges-Lehmann large-sample interval (n >= 50: Hollander & Wolfe normal k)")
from scipy.stats import norm
xs = [round(0.37 * i + 0.011 * (i * i % 7), 3) for i in range(60)]
ys = [round(0.41 * j - 1.3 + 0.013 * (j * j % 5), 3) for j in range(55)]
assert len(set(xs) | set(ys)) == len(xs) + len(ys), "ties"
m, n = len(xs), len(ys)
d = sorted(a - b for a in xs for b in ys)
z = norm.ppf(0.975)
k = int(round(m * n / 2 - z * math.sqrt(m * n * (m + n + 1) / 12)))
print("k", k, "CI95", d[k - 1], d[m * n - k], "HL", float(np.median(d)))
