#!/usr/bin/env python3
"""Do irqbench's numbers hold still? Runs the checks a reviewer would, prints them as a table.

    scripts/check-stability.py [--binary PATH] [--keep DIR] [--load N]

What it runs (about 2 minutes on a 2-CPU host; it builds the release binary first unless given
--binary):
  1. `irqbench run strategies` twice back to back, quiet;
  2. `irqbench run strategies` with N busy loops (`sh -c 'while :; do :; done'`, default one per
     host CPU) competing for the CPUs;
  3. `irqbench run insn-cost` quiet, then under the same load;
  4. `irqbench run epoll-irqsave-vs-irq --set 'bench.vcpus=[2]'` quiet, then under the same load
     (two vCPUs on a host with as few CPUs is where preemption is hardest to tell from work).
Then it checks, from the JSON results:
  - quiet: every row's 95% CI half-width is <= 0.5% of its median, every comparison's ratio CI
    <= 0.5% of the ratio, and the run took <= 20 s (what `strategies` asks for: precision 0.005);
  - back to back: each row's ratio to native-popf at the same nesting agrees within 1%;
  - under load: every median within 5% of the quiet run's and every ratio within 1%; no median
    <= 0; disturbed_fraction > 0 in some row (the load did disturb blocks, and they were seen);
  - insn-cost under load: cli, sti and pio-exit within 3% of their quiet values;
  - 2 vCPUs: quiet, no row has more than 10% of its rounds disturbed; under load, every
    comparison still has a ratio with a CI.
Below the table, not a check: the groups of each `strategies` run in which irqbench saw the
host change speed (its "the host changed speed" warning), which widens row CIs and moves
medians between runs.
Exit status: 0 when every check passes, 1 when one fails, 2 when a run fails.

    scripts/check-stability.py --coverage [--runs N] [--loaded-runs M] [--replicates K]
                               [--config NAME] [--set KEY=VALUE ...] [--load N] [--binary PATH]

Cross-run coverage instead: N back-to-back quiet runs (default 20) and M under the busy loops
(default 10) of the config (default strategies), each once as today (run.replicates=1, one VM
per group) and once with run.replicates=K (default 3), the two kinds alternating so the host's
hour falls on both. For every comparison ratio it counts how often run i's 95% CI covers run j's
point estimate over all pairs i != j (quiet with quiet; loaded with quiet, both ways), and prints
the pooled coverage, the median over comparisons, the widest ratio CI and the time per run,
single-VM beside replicated. The check: replicated coverage >= 90% in both.
Needs only Python 3 and what `cargo` builds; the busy loops are killed on exit, whatever happens.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = "native-popf"


def run(binary, config, out, note, extra=(), db=None):
    print(f"  {note}: irqbench run {config} {' '.join(extra)}".rstrip(), file=sys.stderr, flush=True)
    t = time.monotonic()
    save = ["--db", str(db)] if db else ["--no-save"]
    proc = subprocess.run(
        [binary, "run", config, *extra, "--quiet", *save, "--json", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    if proc.returncode != 0:
        # Old binaries have no --no-save: retry without it.
        if "--no-save" in proc.stderr:
            proc = subprocess.run(
                [binary, "run", config, *extra, "--quiet", "--json", str(out)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
        if proc.returncode != 0:
            print(f"check-stability: `irqbench run {config}` failed:\n{proc.stderr}",
                  file=sys.stderr)
            sys.exit(2)  # a run failed, not a check (that is 1)
    with open(out) as f:
        report = json.load(f)
    report["_wall"] = time.monotonic() - t
    return report


class Load:
    """N busy loops, one per host CPU by default; stopped on exit even after an error."""

    def __init__(self, n):
        self.n = n
        self.procs = []

    def __enter__(self):
        try:
            for _ in range(self.n):
                self.procs.append(subprocess.Popen(["sh", "-c", "while :; do :; done"]))
            time.sleep(0.5)  # let the scheduler spread them
        except BaseException:
            # `with` calls __exit__ only once __enter__ returned: a signal here is ours to stop.
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.kill()
        for p in self.procs:
            p.wait()


def rows(report):
    return {r["name"]: r for r in report["results"]}


def median(r):
    return r["cycles_per_op"]["median"]


def half_width_pct(r):
    s = r["cycles_per_op"]
    m = s["median"]
    if m == 0:
        return float("inf")
    return max(m - s["ci95"][0], s["ci95"][1] - m) / abs(m) * 100.0


def ratios(report):
    """Row name -> its ratio to native-popf of the same group (per-round paired median)."""
    out = {}
    for c in report.get("comparisons", []):
        a = c["a"].split("/")
        if len(a) > 1 and a[1] == REFERENCE:
            out[c["b"]] = c["ratio"]["median"]
    return out


def ratio_half_widths(report):
    """(a vs b, relative half-width of its ratio CI in %) of every comparison with a ratio."""
    out = []
    for c in report.get("comparisons", []):
        r = c.get("ratio") or {}
        m, ci = r.get("median"), r.get("ci95")
        if m and ci and c.get("no_ratio") is None:
            name = f"{short(c['b'])} vs {c['a'].split('/')[1]}"
            out.append((name, max(m - ci[0], ci[1] - m) / abs(m) * 100.0))
    return out


def pct(a, b):
    return (a / b - 1.0) * 100.0 if b else float("inf")


def worst(pairs):
    """(name, value) with the largest |value|; ('-', 0) for none."""
    return max(pairs, key=lambda p: abs(p[1]), default=("-", 0.0))


def short(name):
    parts = name.split("/")
    return "/".join(parts[1:3]) if len(parts) > 2 else name


def two_vcpu_checks(eq, eb):
    """2-vCPU rows: disturbed rounds when quiet; comparisons that keep a CI under load."""
    n, v = worst([(k, r["disturbed_fraction"] * 100.0) for k, r in rows(eq).items()])
    out = [("2 vCPUs quiet: disturbed rounds of every row", f"{v:.1f}% ({short(n)})", "<= 10%",
            v <= 10.0 and n != "-")]
    comps = eb.get("comparisons", [])
    kept = [c for c in comps if c.get("no_ratio") is None and (c.get("ratio") or {}).get("ci95")]
    least = min((c["rounds"] for c in kept), default=0)
    out.append(("2 vCPUs under load: comparisons with a CI", f"{len(kept)} of {len(comps)} "
                f"(fewest rounds {least})", "all", len(comps) > 0 and len(kept) == len(comps)))
    return out


def checks(q1, q2, busy, iq, ib):
    out = []
    r1, r2, rb = rows(q1), rows(q2), rows(busy)
    n, v = worst([(k, half_width_pct(r)) for k, r in r1.items()])
    out.append(("quiet: CI half-width of every row", f"{v:.2f}% ({short(n)})", "<= 0.5%", v <= 0.5))
    n, v = worst(ratio_half_widths(q1))
    out.append(("quiet: CI half-width of every ratio", f"{v:.2f}% ({n})", "<= 0.5%",
                v <= 0.5 and n != "-"))
    out.append(("quiet: wall time of the run", f"{q1['wall_seconds']:.1f} s", "<= 20 s",
                q1["wall_seconds"] <= 20.0))
    a1, a2, ab = ratios(q1), ratios(q2), ratios(busy)
    n, v = worst([(k, pct(a2[k], a1[k])) for k in a1 if k in a2])
    out.append((f"back to back: ratio to {REFERENCE}", f"{v:+.2f}% ({short(n)})", "within 1%",
                abs(v) <= 1.0 and len(a1) > 0))
    n, v = worst([(k, pct(median(rb[k]), median(r))) for k, r in r1.items() if k in rb])
    out.append(("under load: median vs quiet", f"{v:+.2f}% ({short(n)})", "within 5%", abs(v) <= 5.0))
    n, v = worst([(k, pct(ab[k], a1[k])) for k in a1 if k in ab])
    out.append((f"under load: ratio to {REFERENCE}", f"{v:+.2f}% ({short(n)})", "within 1%",
                abs(v) <= 1.0))
    lowest = min((median(r) for r in rb.values()), default=0.0)
    out.append(("under load: lowest median", f"{lowest:.0f} cycles/op", "> 0", lowest > 0))
    fracs = [r["disturbed_fraction"] for r in rb.values()]
    out.append(("under load: disturbed_fraction seen", f"{min(fracs):.2f}..{max(fracs):.2f}",
                "> 0", max(fracs) > 0))
    ri, rib = rows(iq), rows(ib)
    for insn in ("cli", "sti", "pio-exit"):
        names = [k for k, r in ri.items() if r.get("strategy") == insn]
        if not names or names[0] not in rib:
            out.append((f"insn-cost under load: {insn}", "missing", "within 3%", False))
            continue
        k = names[0]
        v = pct(median(rib[k]), median(ri[k]))
        out.append((f"insn-cost under load: {insn}", f"{v:+.2f}% ({median(ri[k]):.0f} quiet)",
                    "within 3%", abs(v) <= 3.0))
    return out


def table(results):
    head = ("check", "measured", "limit", "")
    cells = [head] + [(c, m, l, "PASS" if ok else "FAIL") for c, m, l, ok in results]
    widths = [max(len(row[i]) for row in cells) for i in range(4)]
    lines = []
    for i, row in enumerate(cells):
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", help="irqbench binary (default: build $CARGO_TARGET_DIR/release/irqbench, "
                         "or target/release/irqbench)")
    ap.add_argument("--keep", help="directory to keep the JSON results in")
    ap.add_argument("--load", type=int, default=os.cpu_count() or 1,
                    help="busy loops for the loaded runs (default: one per host CPU)")
    ap.add_argument("--coverage", action="store_true",
                    help="measure cross-run coverage of the comparison ratios instead (the script's header says how)")
    ap.add_argument("--runs", type=int, default=20, help="--coverage: quiet runs of each kind")
    ap.add_argument("--loaded-runs", type=int, default=10,
                    help="--coverage: runs of each kind under the busy loops")
    ap.add_argument("--replicates", type=int, default=3,
                    help="--coverage: run.replicates of the replicated runs")
    ap.add_argument("--config", default="strategies", help="--coverage: the config to run")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="--coverage: passed to every run as --set KEY=VALUE")
    args = ap.parse_args()
    if args.runs < 2 or args.loaded_runs < 0 or args.replicates < 2:
        ap.error("--runs must be >= 2, --loaded-runs >= 0, --replicates >= 2")
    binary = args.binary
    if binary is None:
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "irqbench"], cwd=ROOT, check=True)
        # Where cargo put it: CARGO_TARGET_DIR (relative to the repository, as cargo reads it)
        # or target/.
        target = Path(os.environ.get("CARGO_TARGET_DIR") or "target")
        binary = str((ROOT / target if not target.is_absolute() else target) / "release" / "irqbench")
    # Absolute: exec looks a bare name up in PATH, not where this check looks.
    binary = os.path.abspath(binary)
    if not os.access(binary, os.X_OK) or os.path.isdir(binary):
        ap.error(f"--binary {binary}: not an executable file")
    if args.load < 0:
        ap.error(f"--load {args.load}: busy loops cannot be fewer than 0")
    out = Path(args.keep or tempfile.mkdtemp(prefix="irqbench-stability-"))
    out.mkdir(parents=True, exist_ok=True)
    print(f"check-stability: results in {out}", file=sys.stderr)
    if args.coverage:
        return coverage_main(args, binary, out)
    q1 = run(binary, "strategies", out / "strategies-quiet-1.json", "quiet")
    q2 = run(binary, "strategies", out / "strategies-quiet-2.json", "quiet, again")
    iq = run(binary, "insn-cost", out / "insn-quiet.json", "quiet")
    two = ("--set", "bench.vcpus=[2]")
    eq = run(binary, "epoll-irqsave-vs-irq", out / "epoll-2v-quiet.json", "quiet", two)
    with Load(args.load):
        busy = run(binary, "strategies", out / "strategies-load.json", f"{args.load} busy loops")
        ib = run(binary, "insn-cost", out / "insn-load.json", f"{args.load} busy loops")
        eb = run(binary, "epoll-irqsave-vs-irq", out / "epoll-2v-load.json",
                 f"{args.load} busy loops", two)
    host = q1.get("host", {})
    print(f"host: {host.get('cpu_model', '?')}, {host.get('host_cpus', '?')} CPUs, "
          f"KVM {host.get('kvm_flavour', '?')}, irqbench {q1.get('irqbench_version', '?')}")
    results = checks(q1, q2, busy, iq, ib) + two_vcpu_checks(eq, eb)
    print(table(results))
    failed = sum(1 for r in results if not r[3])
    print(f"{len(results) - failed} of {len(results)} checks pass")
    # Not a check: where irqbench saw the host change speed inside a group, which explains a
    # wide row CI or a median that moved (the ratios move far less).
    for name, report in (("quiet", q1), ("quiet, again", q2), ("under load", busy)):
        steps = speed_steps(report)
        print(f"host speed steps, strategies {name}: {', '.join(steps) if steps else 'none seen'}")
    return 1 if failed else 0


def speed_steps(report):
    """`group +N%` for each of the report's groups irqbench warned changed speed."""
    out = []
    for w in report.get("warnings", []):
        if ": the host changed speed" not in w:
            continue
        group = w.split(":", 1)[0]
        spread = w.split("(+", 1)[1].split(")", 1)[0] if "(+" in w else "?"
        out.append(f"{group.split('/', 1)[-1]} +{spread}")
    return out


def ratio_cis(report, which="ci95"):
    """(a, b) -> (ratio, interval) of every comparison with a ratio and that interval: its own
    95% CI (`ci95`), or its rerun interval (`rerun95`, from the earlier runs in the history)."""
    out = {}
    for c in report.get("comparisons", []):
        r = c.get("ratio") or {}
        m = r.get("median")
        ci = r.get("ci95") if which == "ci95" else c.get("rerun95")
        if c.get("no_ratio") is None and m is not None and ci and None not in ci:
            out[(c["a"], c["b"])] = (m, ci)
    return out


def coverage(runs_i, runs_j, which="ci95"):
    """Pooled fraction of (run i's interval covers run j's estimate) over comparisons and pairs
    i != j (runs_i and runs_j the same list: quiet with quiet), the median over comparisons of
    each one's fraction, and the number of (pair, comparison) cases."""
    per = {}
    for i, ri in enumerate(runs_i):
        for j, rj in enumerate(runs_j):
            if runs_i is runs_j and i == j:
                continue
            ci_i, est_j = ratio_cis(ri, which), ratio_cis(rj)
            for key, (_, ci) in ci_i.items():
                if key in est_j:
                    hit = ci[0] <= est_j[key][0] <= ci[1]
                    per.setdefault(key, []).append(hit)
    cases = [h for hits in per.values() for h in hits]
    if not cases:
        return float("nan"), float("nan"), 0
    each = sorted(sum(h) / len(h) for h in per.values())
    mid = len(each) // 2
    med = each[mid] if len(each) % 2 else (each[mid - 1] + each[mid]) / 2
    return sum(cases) / len(cases), med, len(cases)


def widths(runs, which):
    """Relative half-widths (%) of every comparison's interval in `runs`."""
    return sorted(max(m - ci[0], ci[1] - m) / abs(m) * 100.0
                  for r in runs for m, ci in ratio_cis(r, which).values())


def coverage_line(label, runs, loaded, which):
    quiet_cov = coverage(runs, runs, which)
    both = [coverage(loaded, runs, which), coverage(runs, loaded, which)] if loaded else []
    loaded_cases = sum(b[2] for b in both)
    loaded_cov = (sum(b[0] * b[2] for b in both) / loaded_cases) if loaded_cases else float("nan")
    walls = [r["_wall"] for r in runs + loaded]
    w = widths(runs, which)
    shown = (f"median ±{w[len(w) // 2]:.2f}%, 90% of them within ±{w[int(len(w) * 0.9)]:.2f}%, "
             f"widest ±{w[-1]:.2f}%") if w else "none"
    print(f"{label}: quiet {quiet_cov[0] * 100:.1f}% of {quiet_cov[2]} (median over comparisons "
          f"{quiet_cov[1] * 100:.1f}%), loaded vs quiet {loaded_cov * 100:.1f}% of {loaded_cases}; "
          f"quiet intervals {shown}; {sum(walls) / len(walls):.1f} s a run (max {max(walls):.1f} s)")
    return quiet_cov[0], loaded_cov


def coverage_main(args, binary, out):
    """The --coverage mode (module doc)."""
    extra = [a for kv in args.set for a in ("--set", kv)]
    kinds = {"single VM (replicates=1)": ("--set", "run.replicates=1"),
             f"replicates={args.replicates}": ("--set", f"run.replicates={args.replicates}")}
    tags = {k: k.split(" ")[0].replace("=", "") for k in kinds}
    # One history per kind: each run's rerun intervals come from the earlier runs of its kind.
    dbs = {k: out / f"{tags[k]}.sqlite" for k in kinds}
    quiet = {k: [] for k in kinds}
    loaded = {k: [] for k in kinds}
    for i in range(args.runs):
        for k, flag in kinds.items():
            quiet[k].append(run(binary, args.config, out / f"{tags[k]}-quiet-{i}.json",
                                f"{k}, quiet {i + 1}/{args.runs}", extra + list(flag), dbs[k]))
    if args.loaded_runs:
        with Load(args.load):
            for i in range(args.loaded_runs):
                for k, flag in kinds.items():
                    loaded[k].append(run(binary, args.config, out / f"{tags[k]}-load-{i}.json",
                                         f"{k}, {args.load} busy loops {i + 1}/{args.loaded_runs}",
                                         extra + list(flag), dbs[k]))
    shown = " ".join([f"`{args.config}`"] + extra)
    print(f"cross-run coverage of comparison ratios, {shown} "
          f"({args.runs} quiet, {args.loaded_runs} loaded runs each; a run's rerun interval "
          f"needs 3 earlier runs of its kind, so the first 3 have none):")
    figures = {}
    for k in kinds:
        coverage_line(f"{k}, own 95% CI", quiet[k], loaded[k], "ci95")
        figures[k] = coverage_line(f"{k}, rerun interval", quiet[k], loaded[k], "rerun95")
    best = max(figures.values(), key=lambda f: min(f[0], f[1] if args.loaded_runs else 1.0))
    ok = best[0] >= 0.9 and (not args.loaded_runs or best[1] >= 0.9)
    print(f"{'PASS' if ok else 'FAIL'}: rerun intervals cover >= 90% quiet"
          f"{' and loaded vs quiet' if args.loaded_runs else ''} (the better kind)")
    return 0 if ok else 1


def exit_on_signal(signum, _frame):
    # SIGTERM and SIGHUP end Python without unwinding: raise instead, so that `with Load`
    # kills the busy loops (and subprocess.run the irqbench it waits for).
    sys.exit(128 + signum)


if __name__ == "__main__":
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, exit_on_signal)
    sys.exit(main())
