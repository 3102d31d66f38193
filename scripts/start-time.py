#!/usr/bin/env python3
"""How long from `exec` to the first measured result of `irqbench run`? Median of 10.

    scripts/start-time.py [--binary PATH] [--runs N] [--against PATH]

It builds the release binary once (unless given --binary), then times N runs (default 10) of
the smallest honest run, each twice, interleaved:

  irqbench run quick --only 'quick/native-popf/*' --set run.max_seconds=0.1
      --set run.min_rounds=3 --set run.precision=0.5 --no-save -q [--csv -]

  - one row (and its group's `empty` baseline, which every group measures);
  - the smallest budget the config schema accepts: `run.max_seconds` 0.1 (its lower bound),
    `run.min_rounds` 3 (its lower bound) and `run.precision` 0.5 (its upper bound), so the
    rounds end as soon as the row's 95% CI is within 50% of its median. The row still gets a
    figure with a real CI, from the same rounds, estimators and checks as any run; block
    length (`run.block_us`) stays at its default, since it is a measurement parameter, not a
    budget;
  - the quick host validation runs, as it does before every `run`; --no-save skips the history
    database, -q the progress and the table.

Definition. "Start to first result" is (a), the whole process: from just before `exec` to the
exit of a run that prints one result. That is what the issue names ("whole process"), and a
result of irqbench exists only once its group's rounds are over: the CSV, JSON and table are
all written after the last group (for this one-row plan the first row is the last), so no
result reaches stdout much before the process ends. (b) is printed beside it to show that:
the time from `exec` to the CSV's first data line arriving on a pipe (`--csv -`). The time of
the measured rounds (the CSV's `wall_ms`: from the first round to the last, no warm-up or
calibration) is printed too, and per run what the process spends outside them (its exit minus
`wall_ms`): on a shared host the rounds' time moves most, and this part shows the rest without
that noise.

With --against OTHER it times the runs of (b), for the two binaries in turn (ABBAAB..., N
each, after one unmeasured run of each), and prints, for start to exit and for the part
outside the rounds, each one's median, the median of the N paired differences (each run of
the binary minus the run of OTHER beside it) and that as a share of OTHER's median: what the
binary saves, measured so that a host that drifts moves both.

Times are CLOCK_MONOTONIC around subprocess.Popen (so they include the fork and exec, ~1 ms);
the 1-, 5- and 15-minute load averages are printed with the figures, since a busy host moves
them.
Exit status: 0 when every run succeeded, 1 when one failed (its stderr is shown).
"""

import argparse
import csv
import io
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ARGS = [
    "run",
    "quick",
    "--only",
    "quick/native-popf/*",
    "--set",
    "run.max_seconds=0.1",
    "--set",
    "run.min_rounds=3",
    "--set",
    "run.precision=0.5",
    "--no-save",
    "-q",
]


def build() -> Path:
    subprocess.run(
        ["cargo", "build", "--release", "-q", "-p", "irqbench"], cwd=ROOT, check=True
    )
    return ROOT / "target" / "release" / "irqbench"


def whole(binary: Path) -> float:
    """(a): ms from before exec to exit."""
    t0 = time.monotonic_ns()
    p = subprocess.run(
        [str(binary), *ARGS], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    t1 = time.monotonic_ns()
    if p.returncode != 0:
        sys.exit(f"irqbench exited {p.returncode}:\n{p.stderr}")
    return (t1 - t0) / 1e6


def streamed(binary: Path) -> tuple[float, float, float]:
    """(b): ms from before exec to the first CSV data line on the pipe, to exit, and the
    rounds' wall_ms from that line."""
    t0 = time.monotonic_ns()
    p = subprocess.Popen(
        [str(binary), *ARGS, "--csv", "-"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert p.stdout is not None
    header = p.stdout.readline()
    row = p.stdout.readline()
    t_row = time.monotonic_ns()
    try:
        rest, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()  # not left running behind us
        p.wait()
        sys.exit("irqbench did not exit within 60 s of its first CSV row")
    t_exit = time.monotonic_ns()
    if p.returncode != 0 or not row:
        sys.exit(f"irqbench exited {p.returncode}:\n{err}")
    rec = next(csv.DictReader(io.StringIO(header + row)))
    return (t_row - t0) / 1e6, (t_exit - t0) / 1e6, float(rec["wall_ms"])


def against(binary: Path, other: Path, runs: int) -> None:
    """Start to exit (and its part outside the rounds) for `binary` and `other`, interleaved,
    and what `binary` saves."""
    whole(binary)  # unmeasured: both binaries' pages into the page cache
    whole(other)
    mine, theirs = [], []
    for i in range(runs):
        # ABBA...: neither binary always runs right after the other.
        if i % 2 == 0:
            mine.append(streamed(binary))
            theirs.append(streamed(other))
        else:
            theirs.append(streamed(other))
            mine.append(streamed(binary))
    print(f"irqbench {' '.join(ARGS)} --csv -  ({runs} runs each, interleaved)")
    parts = [("start to exit", lambda r: r[1]), ("outside the rounds", lambda r: r[1] - r[2])]
    for name, pick in parts:
        a, b = [pick(r) for r in mine], [pick(r) for r in theirs]
        paired = [x - y for x, y in zip(a, b)]
        print(line(f"{name}: {binary}", a))
        print(line(f"{name}: {other}", b))
        print(line(f"{name}: paired difference", paired))
        saved = -statistics.median(paired)
        share = 100 * saved / statistics.median(b)
        print(f"{name}: the first saves {saved:.1f} ms, {share:.1f}% of the second's median")


def line(name: str, xs: list[float]) -> str:
    return (
        f"{name:<40} median {statistics.median(xs):7.1f} ms   "
        f"min {min(xs):7.1f}   max {max(xs):7.1f}"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--binary", type=Path, help="an irqbench binary (default: build release)")
    ap.add_argument("--runs", type=int, default=10, help="runs of each kind (default 10)")
    ap.add_argument(
        "--against", type=Path, help="another irqbench binary: (a) of both, interleaved"
    )
    a = ap.parse_args()
    if a.runs < 1:
        ap.error("--runs must be at least 1")
    # Absolute: exec looks a bare name up in PATH, not where the check below looked.
    binary = (a.binary or build()).absolute()
    if not os.access(binary, os.X_OK) or binary.is_dir():
        ap.error(f"--binary {binary}: not an executable file")
    other = a.against.absolute() if a.against else None
    if other and (not os.access(other, os.X_OK) or other.is_dir()):
        ap.error(f"--against {other}: not an executable file")
    load_before = os.getloadavg()
    if other:
        against(binary, other, a.runs)
        print_load(load_before)
        return 0
    whole_ms, row_ms, exit_ms, rounds_ms = [], [], [], []
    whole(binary)  # one unmeasured run: the binary's pages into the page cache
    for _ in range(a.runs):
        whole_ms.append(whole(binary))
        r, e, g = streamed(binary)
        row_ms.append(r)
        exit_ms.append(e)
        rounds_ms.append(g)
    print(f"irqbench {' '.join(ARGS)}  ({a.runs} runs each)")
    print(line("(a) start to exit (whole process)", whole_ms))
    print(line("(b) start to first CSV row (--csv -)", row_ms))
    print(line("    start to exit of those runs", exit_ms))
    print(line("    the measured rounds (CSV wall_ms)", rounds_ms))
    outside = [e - g for e, g in zip(exit_ms, rounds_ms)]
    print(line("    outside the rounds (exit - wall_ms)", outside))
    print_load(load_before)
    return 0


def print_load(before: tuple[float, float, float]) -> None:
    after = os.getloadavg()
    print(
        "load average before %.2f %.2f %.2f, after %.2f %.2f %.2f (%d CPUs)"
        % (*before, *after, os.cpu_count() or 0)
    )


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:
        # stdout was closed (`| head`): nothing more to say, and no traceback.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(141)
