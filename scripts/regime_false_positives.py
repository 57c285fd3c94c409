#!/usr/bin/env python3
"""How often the regime test of crates/vcpulab-core/src/repro/stats.rs flags a sample that
has ONE regime: the largest Ashman's D over the splits the test tries (each side at least
2 values and a fifth of the sample), on 4,000 unimodal samples of each shape and size.
The test flags D >= 10; this prints the 95th, 99th and 99.9th percentiles of D and the
share of samples at or above 10.

    python3 scripts/regime_false_positives.py
"""
import math
import random


def best_d(xs):
    xs = sorted(xs)
    n = len(xs)
    side = max(2, -(-n // 5))
    best = 0.0
    for k in range(side, n - side + 1):
        a, b = xs[:k], xs[k:]
        ma, mb = sum(a) / len(a), sum(b) / len(b)
        va = sum((x - ma) ** 2 for x in a) / (len(a) - 1)
        vb = sum((x - mb) ** 2 for x in b) / (len(b) - 1)
        best = max(best, math.sqrt(2) * (mb - ma) / math.sqrt(va + vb + 1e-300))
    return best


def main():
    rng = random.Random(1)
    shapes = {
        "normal": lambda: rng.gauss(0, 1),
        "lognormal(0.5)": lambda: rng.lognormvariate(0, 0.5),
        "exponential": lambda: rng.expovariate(1),
        "uniform": lambda: rng.random(),
    }
    print("n   shape            p95    p99   p99.9  share >= 10")
    for n in (6, 10, 20, 30):
        for name, draw in shapes.items():
            ds = sorted(best_d([draw() for _ in range(n)]) for _ in range(4000))
            q = lambda p: ds[int(p * len(ds))]
            share = sum(d >= 10 for d in ds) / len(ds)
            print(f"{n:<3} {name:15s} {q(.95):6.2f} {q(.99):6.2f} {q(.999):6.2f}  {100 * share:5.2f} %")


if __name__ == "__main__":
    main()
