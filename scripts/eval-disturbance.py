#!/usr/bin/env python3
"""What preempted a group's vCPU threads, and whether subtracting off-CPU time corrects a block.

usage: scripts/eval-disturbance.py DIR/<group>.csv TSC_KHZ

Reads the files `IRQBENCH_DUMP_ROUNDS=DIR irqbench run CONFIG` writes. From <group>.sched: per
thread of the process, run and wait (runqueue) ms over the group's rounds (schedstat), and per
CPU the busy, idle and steal share (/proc/stat) over the same span. From <group>.csv: per
variant, the median block of the blocks the thread-clock rules kept with its 95% CI, and the
median of the flagged blocks after subtracting their off-CPU time x the TSC rate: the
correction holds when that median lies inside the kept blocks' CI.
"""
import csv, signal, math, statistics, sys
from collections import defaultdict


def med_ci(v):
    v = sorted(v)
    n = len(v)
    if n < 6:
        return None
    k = max(int(math.floor(n / 2 - 1.96 * math.sqrt(n) / 2)), 0)
    return statistics.median(v), v[k], v[n - 1 - k]


def sched(path):
    snaps = {"before": ({}, {}), "after": ({}, {})}
    for line in open(path):
        f = line.split()
        threads, cpus = snaps[f[0]]
        if f[1] == "thread":
            threads[f[2]] = [int(x) for x in f[3:6]]
        else:
            cpus[f[1]] = [int(x) for x in f[2:]]
    (tb, cb), (ta, ca) = snaps["before"], snaps["after"]
    print("thread   run ms  wait ms  slices   (schedstat over the rounds)")
    for tid in sorted(ta, key=lambda t: -ta[t][0]):
        b = tb.get(tid, [0, 0, 0])
        d = [a - x for a, x in zip(ta[tid], b)]
        print(f"{tid:>7} {d[0] / 1e6:>8.1f} {d[1] / 1e6:>8.1f} {d[2]:>7}")
    print("cpu      busy%  idle%  steal%  (/proc/stat: user nice system idle iowait irq softirq steal)")
    for c in sorted(ca):
        d = [a - b for a, b in zip(ca[c], cb[c])]
        total = max(sum(d[:8]), 1)
        busy = d[0] + d[1] + d[2] + d[5] + d[6]
        print(f"{c:<7} {100 * busy / total:>6.1f} {100 * (d[3] + d[4]) / total:>6.1f} {100 * d[7] / total:>7.1f}")


def correction(path, khz):
    by = defaultdict(list)
    for r in csv.DictReader(open(path)):
        by[int(r["variant"])].append(r)
    print("var blocks flagged  kept median [95% CI]         corrected median  inside  off-CPU median us")
    for v in sorted(by):
        kept = [float(r["cycles"]) for r in by[v] if r["host_flagged"] == "0"]
        fl = [r for r in by[v] if r["host_flagged"] == "1"]
        q = med_ci(kept)
        if q is None or not fl:
            print(f"{v:>3} {len(by[v]):>6} {len(fl):>7}  (too few to judge)")
            continue
        corr = statistics.median(float(r["cycles"]) - float(r["off_cpu_ns"]) * khz / 1e6 for r in fl)
        off = statistics.median(float(r["off_cpu_ns"]) / 1e3 for r in fl)
        inside = q[1] <= corr <= q[2]
        print(f"{v:>3} {len(by[v]):>6} {len(fl):>7}  {q[0]:>9.0f} [{q[1]:.0f}, {q[2]:.0f}]  "
              f"{corr:>10.0f} ({100 * (corr / q[0] - 1):+.1f}%) {str(inside):>6} {off:>10.0f}")


signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # a closed pipe ends the output quietly
if len(sys.argv) < 3:
    sys.exit(__doc__)
path, khz = sys.argv[1], float(sys.argv[2])
sched(path[: -len(".csv")] + ".sched")
correction(path, khz)
