"""Statistics across seeds: means with 95% confidence intervals (Student t).

Runs of different seeds are independent samples of a metric; the interval is
``mean ± t(0.975, n-1) · sd / sqrt(n)``. With one sample the interval is undefined (NaN).
Paired comparisons (A and B run with the same seeds) use the t-interval of the per-seed
differences. No SciPy: the t quantile is computed from the regularized incomplete beta.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Optional


def _betacf(a: float, b: float, x: float) -> float:
    # Continued fraction of the incomplete beta (modified Lentz), Numerical Recipes 6.4.
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c if abs(1.0 + aa / c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c if abs(1.0 + aa / c) > tiny else tiny
        de = d * c
        h *= de
        if abs(de - 1.0) < 1e-15:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    lbt = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(lbt) * _betacf(a, b, x) / a
    return 1.0 - math.exp(lbt) * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` degrees of freedom."""
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


def t_ppf(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t (bisection on :func:`t_cdf`; |error| < 1e-10)."""
    if not 0.0 < p < 1.0:
        raise ValueError("p must be in (0, 1)")
    if p < 0.5:
        return -t_ppf(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12:
            break
    return 0.5 * (lo + hi)


@dataclass(frozen=True)
class Estimate:
    """A mean over ``n`` samples with its confidence interval [lo, hi]."""

    mean: float
    lo: float
    hi: float
    n: int
    sd: float

    @property
    def half_width(self) -> float:
        return (self.hi - self.lo) / 2.0

    def as_dict(self) -> dict[str, Any]:
        return {"mean": self.mean, "ci_lo": self.lo, "ci_hi": self.hi, "n": self.n, "sd": self.sd}


def _clean(values: Iterable[Any]) -> list[float]:
    out = []
    for v in values:
        if v is None:
            continue
        try:
            f = float(v)
        except (TypeError, ValueError):
            continue
        if not math.isnan(f):
            out.append(f)
    return out


def mean_ci(values: Iterable[Any], level: float = 0.95) -> Estimate:
    """Mean and two-sided t confidence interval; None/NaN values are skipped."""
    xs = _clean(values)
    n = len(xs)
    if n == 0:
        nan = float("nan")
        return Estimate(nan, nan, nan, 0, nan)
    m = math.fsum(xs) / n
    if n == 1:
        return Estimate(m, float("nan"), float("nan"), 1, float("nan"))
    sd = math.sqrt(math.fsum((x - m) ** 2 for x in xs) / (n - 1))
    h = t_ppf(0.5 + level / 2.0, n - 1) * sd / math.sqrt(n)
    return Estimate(m, m - h, m + h, n, sd)


def paired_diff_ci(a: Sequence[Any], b: Sequence[Any], level: float = 0.95) -> Estimate:
    """CI of mean(b - a) over pairs (same seed) where both are numbers."""
    diffs = []
    for x, y in zip(_clean_pairs(a), _clean_pairs(b)):
        if x is not None and y is not None:
            diffs.append(y - x)
    return mean_ci(diffs, level)


def _clean_pairs(values: Sequence[Any]) -> list[Optional[float]]:
    out: list[Optional[float]] = []
    for v in values:
        try:
            f = float(v) if v is not None else None
        except (TypeError, ValueError):
            f = None
        out.append(None if f is None or math.isnan(f) else f)
    return out


def aggregate(df: Any, by: Sequence[str], metrics: Sequence[str], level: float = 0.95) -> Any:
    """One row per group of ``by`` (e.g. every axis but the seed) with, per metric,
    ``<metric>.mean``, ``.ci_lo``, ``.ci_hi``, ``.n``: the mean over seeds and its CI."""
    import pandas as pd

    rows = []
    groups = df.groupby(list(by), sort=True, dropna=False) if by else [((), df)]
    for key, g in groups:
        key = key if isinstance(key, tuple) else (key,)
        row = dict(zip(by, key))
        for m in metrics:
            e = mean_ci(g[m]) if m in g else mean_ci([])
            row.update({f"{m}.mean": e.mean, f"{m}.ci_lo": e.lo, f"{m}.ci_hi": e.hi, f"{m}.n": e.n})
        rows.append(row)
    return pd.DataFrame(rows)
