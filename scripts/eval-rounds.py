#!/usr/bin/env python3
"""Ratio estimators on real rounds dumped by `IRQBENCH_DUMP_ROUNDS=DIR irqbench run CONFIG`.

usage: scripts/eval-rounds.py DIR/<group>.csv [CHUNK]

Per comparison b/a of the group (variant 0 is the empty baseline), each candidate estimator
(paired ratio, ratio of medians, Hodges-Lehmann, batched) is computed on all kept rounds (the reference) and on consecutive
chunks of CHUNK kept rounds (default 100): how often a chunk's CI holds the reference (the
paired-ratio estimate over all rounds, common to every estimator) and the chunk CIs' median
relative half-width. Kept: blocks the thread-clock rules did not flag, and not block-time
outliers (> median + 10 MAD and > 1.25 x median), as in analysis/disturbance.rs.
"""
import csv, signal, math, random, statistics, sys
from collections import defaultdict


def med_ci(v):
    v = sorted(v)
    n = len(v)
    if n < 6:
        return None
    # Order-statistics ranks, normal approximation of Binomial(n, 1/2).
    k = max(int(math.floor(n / 2 - 1.96 * math.sqrt(n) / 2)), 0)
    return statistics.median(v), v[k], v[n - 1 - k]


def paired(p):
    return med_ci([y / x for x, y in p])


def ratio_of_medians(p, reps=400, seed=1):
    if len(p) < 6:
        return None
    rng = random.Random(seed)
    point = statistics.median(y for _, y in p) / statistics.median(x for x, _ in p)
    r = []
    for _ in range(reps):
        s = [p[rng.randrange(len(p))] for _ in p]
        r.append(statistics.median(y for _, y in s) / statistics.median(x for x, _ in s))
    r.sort()
    return point, r[int(0.025 * reps)], r[int(0.975 * reps) - 1]


def hodges_lehmann(p):
    logs = [math.log(y / x) for x, y in p if x > 0 and y / x > 0]
    n = len(logs)
    if n < 6 or n < len(p):
        return None
    w = sorted((logs[i] + logs[j]) / 2 for i in range(n) for j in range(i, n))
    k = max(int(len(w) / 2 - 1.96 * math.sqrt(n * (n + 1) * (2 * n + 1) / 24)), 0)
    return math.exp(statistics.median(w)), math.exp(w[k]), math.exp(w[len(w) - 1 - k])


def batched(size):
    def f(p):
        b = [p[i:i + size] for i in range(0, len(p) - size + 1, size)]
        return med_ci([sum(y for _, y in c) / sum(x for x, _ in c) for c in b])
    return f


ESTIMATORS = [("paired ratio (median)", paired), ("ratio of medians (bootstrap)", ratio_of_medians),
              ("Hodges-Lehmann (log ratio)", hodges_lehmann), ("batched ratio, 5 rounds", batched(5)),
              ("batched ratio, 10 rounds", batched(10))]


def outliers(values):
    m = statistics.median(values)
    mad = statistics.median(abs(v - m) for v in values) * 1.4826
    limit = max(m + 10 * mad, m * 1.25)
    return [v > limit for v in values]


def load(path):
    cells = defaultdict(lambda: [0.0, 0, 0, False])  # cycles sum, vcpus, ops, flagged
    for r in csv.DictReader(open(path)):
        c = cells[(int(r["round"]), int(r["variant"]))]
        c[0] += float(r["cycles"])
        c[1] += 1
        c[2] = int(r["ops"])
        c[3] |= r["host_flagged"] == "1"
    variants = sorted({v for _, v in cells})
    for v in variants:
        keys = sorted(k for k in cells if k[1] == v)
        for k, out in zip(keys, outliers([cells[k][0] / cells[k][1] for k in keys])):
            cells[k][3] |= out
    rounds = sorted({r for r, _ in cells})
    return cells, rounds, variants


def main():
    path = sys.argv[1]
    chunk = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    cells, rounds, variants = load(path)
    net = lambda r, v: (cells[(r, v)][0] / cells[(r, v)][1] - cells[(r, 0)][0] / cells[(r, 0)][1]) / cells[(r, v)][2]
    stats = defaultdict(lambda: [0, 0, []])
    for a in variants[1:]:
        for b in variants[1:]:
            if b <= a:
                continue
            kept = [r for r in rounds if all((r, v) in cells and not cells[(r, v)][3] for v in (0, a, b))]
            p = [(net(r, a), net(r, b)) for r in kept]
            ref = paired(p)
            if ref is None:
                continue
            for name, est in ESTIMATORS:
                for i in range(0, len(p) - chunk + 1, chunk):
                    e = est(p[i:i + chunk])
                    s = stats[name]
                    s[1] += 1
                    if e is None:
                        continue
                    s[0] += e[1] <= ref[0] <= e[2]
                    s[2].append(max(e[0] - e[1], e[2] - e[0]) / abs(ref[0]))
    print(f"{path}: chunks of {chunk} kept rounds; reference = paired ratio over all kept rounds")
    print(f"{'estimator':<30} {'chunks':>6} {'covers ref':>10} {'median ±half/ratio':>19}")
    for name, _ in ESTIMATORS:
        c, n, w = stats[name]
        wm = statistics.median(w) if w else float("nan")
        print(f"{name:<30} {n:>6} {100 * c / max(n, 1):>9.1f}% {100 * wm:>18.2f}%")


signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # a closed pipe ends the output quietly
if len(sys.argv) < 2:
    sys.exit(__doc__)
main()
