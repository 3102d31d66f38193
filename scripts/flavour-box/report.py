#!/usr/bin/env python3
"""Judges the flavour box's default suite from the files it brought back (run.sh beside it).

Prints one line per judged item (PASS / FAIL / KNOWN / INFO) and exits 1 when any item FAILs.
KNOWN is a failure the emulator causes, not KVM or irqbench; each is listed below with its reason
and must still show up as what it is (its validate line or test name), never silently.
"""
import argparse
import json
import os
import re
import subprocess
import sys

# Failures of the emulators (QEMU TCG, Bochs) rather than of KVM or irqbench, by flavour. Keys are
# validate check names or test names; every entry says why, and is removed once the failure is
# gone (an entry that names nothing failing would hide the next real failure of that name). The
# timing checks (tsc.*, irq.*) are NOT JUDGED on an emulated CPU, so they need no entry.
TCG_1CPU = ("the box has one CPU: the VMM's interrupt thread and the vCPU thread share it, and "
            "TCG's timers are emulated; delivery timing is the emulator's, not hardware's")
TCG_SPEED = ("TCG's TSC runs with its emulation speed, not a core clock: two back-to-back runs of "
             "the same rows differed by 60-80% (68 vs 121 cycles/op, CIs apart), so `check` rightly "
             "calls it a regression; the test asserts that a same-host rerun passes the gate")
VMX_INJECT = ("one CPU: the VMM's inject thread and the vCPU thread share it, so raises merge "
              "while one waits; the debug-built VMM of the tests takes 78-81% of them, the release "
              "`irqbench validate` in the same box 101%")
KNOWN_EMULATOR = {
    "svm": {
        "runs_are_saved_and_check_gates_a_regression": TCG_SPEED,
        "session::tests::lapic_timer_ticks_grow_with_phase_length":
            "TCG's TSC runs with its emulation speed, not with time: a 10 ms idle phase took 310M "
            "TSC cycles and the 80 ms one 227M, so ticks (wall time) need not grow with either; "
            + TCG_1CPU,
        "measure::tests::inject_load_counts_window_exits_and_never_blames_the_critical_section":
            "on the box's one CPU the inject thread mostly runs while the vCPU thread is out of "
            "the guest at a block's doorbell, and the interrupt it raises is then taken right "
            "after that doorbell, before the next block's counters are read: in 8 of 32 box runs "
            "none of 355-4015 raised landed inside a timed block (the guest took them in "
            "guest_main); the window exits were still attributed outside every body; " + TCG_1CPU,
    },
    "vmx": {
        "irq.inject": VMX_INJECT,
        "validate::tests::the_full_suite_passes_on_this_host": VMX_INJECT,
        "validate_judges_this_host_and_exits_by_its_verdict": VMX_INJECT,
    },
}


# Oracle rows whose instruction count differs from what `irqbench list` says, with the count the
# guest really executes per unit and why. Each is still checked, against this count.
ORACLE_EXPLAINED = {
    "popf-same-if": (17 / 8, "guest/src/ops.S irqbench_insn_popf_same_if runs one `sti` before its "
                             "8x `push; popf` (to make IF 1), and the probe divides by 8 units: "
                             "(1 + 16) / 8 = 2.125, i.e. each unit also pays 1/8 of an sti"),
}


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        return e


class Judge:
    def __init__(self, flavour):
        self.flavour = flavour
        self.known = KNOWN_EMULATOR[flavour]
        self.failed = 0

    def item(self, ok, name, text):
        if ok is None:
            print(f"INFO   {name}: {text}")
        elif ok:
            print(f"PASS   {name}: {text}")
        elif name in self.known:
            print(f"KNOWN  {name}: {text}\n         (emulator: {self.known[name]})")
        else:
            print(f"FAIL   {name}: {text}")
            self.failed += 1


def steps(j, out):
    path = os.path.join(out, "steps")
    if not os.path.exists(path):
        j.item(False, "steps", "the suite left no steps file")
        return {}
    st = {}
    for line in open(path):
        words = line.split()
        if len(words) != 2:
            if words:
                j.item(False, "steps", f"a malformed line in the steps file: {line.strip()!r}")
            continue
        st[words[0]] = words[1]
    for name, rc in st.items():
        if name == "tests":
            continue  # judged test by test below
        if name == "validate":
            # 0: PASS or WARN, 1: a FAIL verdict (judged check by check below); else it broke.
            j.item(rc in ("0", "1"), "step validate", f"exit {rc}")
            if not os.path.exists(os.path.join(out, "validate.txt")):
                j.item(False, "validate", "the validate step ran but left no validate.txt")
            continue
        j.item(rc == "0", f"step {name}", f"exit {rc}")
    return st


def validate(j, out):
    path = os.path.join(out, "validate.txt")
    if not os.path.exists(path):
        return
    text = open(path).read()
    for m in re.finditer(r"^(PASS|WARN|FAIL|NOT JUDGED)  (\S+)\n((?:      .*\n)*)", text, re.M):
        verdict, name, body = m.groups()
        measured = re.search(r"measured: (.*)", body)
        what = measured.group(1) if measured else ""
        if verdict == "NOT JUDGED":
            why = re.search(r"why: +(.*)", body)
            j.item(None, name, f"NOT JUDGED {what} (why: {why.group(1) if why else '?'})")
        elif verdict == "WARN":
            why = re.search(r"why: +(.*)", body)
            j.item(None, name, f"WARN {what} (why: {why.group(1) if why else '?'})")
        else:
            j.item(verdict == "PASS", name, what)
    flav = re.search(r"^PASS  flavour\n.*expected: (\w+)", text, re.M)
    j.item(bool(flav) and flav.group(1) == j.flavour, "validate flavour",
           flav.group(1) if flav else "no PASS flavour line")


def tests(j, out):
    path = os.path.join(out, "tests.txt")
    if not os.path.exists(path):
        j.item(False, "tests", "no test output came back")
        return
    text = open(path).read()
    passed = sum(int(n) for n in re.findall(r"^test result: .*?(\d+) passed", text, re.M))
    # The suite ends each binary's output with "@@exit <binary> <status>"; a file without any
    # (an older suite) is one section of unknown status.
    parts = re.split(r"^@@exit (\S+) (\d+)$", text, flags=re.M)
    sections = [(parts[i], parts[i + 1], int(parts[i + 2])) for i in range(0, len(parts) - 2, 3)]
    tail = parts[-1]
    if not sections:
        sections, tail = [(text, "the test binaries", None)], ""
    failed = []
    for body, binary, status in sections:
        # A failed test is named on its result line, or (when its output split that line) by
        # libtest's "---- NAME stdout ----" block.
        names = sorted(set(re.findall(r"^test (\S+) \.\.\. .*FAILED", body, re.M))
                       | set(re.findall(r"^---- (\S+) stdout ----$", body, re.M)))
        counted = sum(int(n) for n in re.findall(r"^test result: .*?(\d+) failed", body, re.M))
        failed += names
        who = os.path.basename(binary)
        if status not in (None, 0) and not names:
            j.item(False, f"tests {who}", f"exit {status} with no failed test named: it crashed or was killed")
        if counted > len(names):
            j.item(False, f"tests {who}", f"{counted} failed, only {len(names)} named")
    if re.search(r"^test ", tail, re.M):
        j.item(False, "tests", "a test binary's output ends without its exit status: the box died in it")
    # A box in which no test ran judged nothing: that is a failure, not a pass.
    j.item(passed > 0, "tests ran",
           f"{passed} passed" if passed else "no test passed or ran: the box could not run them")
    for name in failed:
        j.item(False, name, "test FAILED")
    unknown = [n for n in failed if n not in j.known]
    print(f"tests: {passed} passed, {len(failed)} failed"
          + (f" ({len(failed) - len(unknown)} known emulator failures)" if failed else ""))


def per_op(row):
    """A row's net per-op counts by name (schema 4 `counts`)."""
    return {k: c["per_op"] for k, c in row.get("counts", {}).items()}


def checklist(j, out):
    """docs/FLAVOURS.md's checklist, items 2-7, judged."""
    insn = "vmmcall" if j.flavour == "svm" else "vmcall"
    reps = {f: load(os.path.join(out, f"fc-{f}.json")) for f in ["main", "port", "vmcall", "vapic-poll"]}
    for f, r in reps.items():
        if isinstance(r, Exception):
            j.item(False, f"checklist {f}", f"no report ({r})")
            continue
        print(f"== {f}: {r['host']['kvm_flavour']} hypercall={r['hypercall_transport']}/{r['hypercall_insn']}"
              f" cycles: {r['cycles_source']['reason']}")
        for x in r["results"]:
            st = per_op(x)
            t = x["totals"]
            med = (x["cycles_per_op"] or {}).get("median")
            print(f"  {x['name']}: {med if med is None else round(med)} cyc/op, exits/op {st.get('exits', 0):.3g},"
                  f" hypercalls stat/op {st.get('hypercalls', 0):.3g}, guest hcalls {t['hypercalls']},"
                  f" vmm hcalls {t['hypercalls_seen_by_vmm']}, IRQs {t['interrupts']}, ticks {x.get('timer_ticks')}")
            for s in [s for s in x["exit_sites"] if s["reason"] == "irq-window-open"][:4]:
                print(f"    window exit: {s['site']} x{s['total']} at {s['rip']:#x} {s['instruction']!r}"
                      f" sti_rip={s.get('sti_rip')}")
        for w in r["warnings"]:
            print("  warning:", w[:200])
        # What makes a run exit 1 (its step line says it did): a failed row, a row without data.
        for fl in r.get("failures", []):
            print(f"  failed row {fl['name']}: {fl['error'][:300]}")
        for x in r["results"]:
            if x.get("no_data"):
                print(f"  row without data {x['name']}: {x['no_data'][:300]}")
        j.item(r["hypercall_insn"] == insn, f"checklist 2 {f} hypercall insn", r["hypercall_insn"])
    row = lambda f: (reps[f]["results"][0] if not isinstance(reps[f], Exception) and reps[f]["results"] else None)
    vm, vp = row("vmcall"), row("vapic-poll")
    if vm:
        t = vm["totals"]
        j.item(t["hypercalls"] == t["hypercalls_seen_by_vmm"] > 0, "checklist 3 vmcall transport",
               f"guest {t['hypercalls']}, vmm {t['hypercalls_seen_by_vmm']}")
    if vp:
        t = vp["totals"]
        # KVM's own counts: means over the kept rounds net of the baseline (schema 4 `counts`).
        stat = per_op(vp).get("hypercalls", 0)
        kvm_mean = per_op(vp).get("exits", 0.0)
        j.item(t["hypercalls_seen_by_vmm"] == 0 and t["hypercalls"] > 0 and kvm_mean > 0,
               "checklist 4 vapic-poll transport",
               f"vmm {t['hypercalls_seen_by_vmm']}, guest {t['hypercalls']}, KVM exits/op (mean of rounds)"
               f" {kvm_mean:.3g}; hypercalls stat/op (mean of rounds) {stat:.3g}")
        if vm:
            # A hypercall is rare per op (pending is set 5000 times/s), so the median cycles/op is
            # that of ops without one: not the hypercall's price.
            j.item(None, "checklist 4 cycles/op (median; ops mostly without a hypercall)",
                   f"vapic-poll {vp['cycles_per_op']['median']:.0f}, vmcall {vm['cycles_per_op']['median']:.0f}")
    main = reps["main"]
    if isinstance(main, Exception):
        return
    for x in main["results"]:
        sites = [s for s in x["exit_sites"] if s["reason"] == "irq-window-open"]
        if x["irq_source"].startswith("inject") and x["strategy"] == "native-cli-sti":
            # Among the strategy's own sites: `guest_main` and `loop` are the glue between and
            # around the ops (the loop's `sti` after a nested section, the block's end).
            own = [s for s in sites if not s["site"].startswith(("guest_main", "loop"))]
            top = max(own, key=lambda s: s["total"])["site"] if own else None
            want = "restore (after sti shadow)"
            j.item(top == want, "checklist 5 window exits native-cli-sti",
                   f"busiest site {top!r} (want {want!r}); sites {[(s['site'], s['total']) for s in sites]}")
        if x["irq_source"].startswith("inject") and x["strategy"] == "native-popf":
            # Nesting 0.5: the loop's own `sti` (ending a nested section) opens windows too, so
            # `restore` is one site among them, not necessarily the busiest.
            got = [s for s in sites if s["site"] == "restore"]
            j.item(bool(got), "checklist 5 window exits native-popf at restore (after popf)",
                   f"sites {[(s['site'], s['total'], s['instruction']) for s in sites]}")
        if x["irq_source"].startswith("inject"):
            body = [s for s in sites if "body" in s["site"]]
            j.item(not body, f"checklist 5 no window exit in a body ({x['strategy']})", f"{len(body)} body sites")
        if x.get("timer_ticks"):
            t = x["timer_ticks"]
            j.item(None, "checklist 6 LAPIC ticks", f"{t} (delivery timing is the emulator's)")
    j.item(None, "checklist 7 cycles", main["cycles_source"]["reason"])


def expected_insns(irqbench):
    """Instruction counts per strategy (from disasm, following the path a body-0, nesting-0 op with
    IF set and nothing pending takes) and per probe (from `list`: the `;`-separated instructions)."""
    text = subprocess.run([irqbench, "disasm"], capture_output=True, text=True, check=True).stdout
    funcs, cur = {}, None
    strat_of = {}
    strat = None
    for line in text.splitlines():
        m = re.match(r"^(\S+) — ", line)
        if m:
            strat = m.group(1)
            continue
        m = re.match(r"^  <(\w+)>:", line)
        if m:
            cur = m.group(1)
            funcs.setdefault(cur, [])
            strat_of.setdefault(strat, cur)
            continue
        m = re.match(r"^    0x([0-9a-f]+): (?:[0-9a-f]{2} )+\s*(\S+)\s*([^<]*)", line)
        if m and cur:
            funcs[cur].append((int(m.group(1), 16), m.group(2), m.group(3).strip()))
    by_addr = {}
    for name, insns in funcs.items():
        for i, (a, _, _) in enumerate(insns):
            by_addr[a] = (name, i)
    ptr = {}  # callq *ADDR: the pv-op table; disasm shows the callee after the strategy
    counts = {}
    for s, f in strat_of.items():
        counts[s] = walk(funcs, by_addr, f, ptr)
    listing = subprocess.run([irqbench, "list"], capture_output=True, text=True, check=True).stdout
    probes = {}
    section = None
    for line in listing.splitlines():
        if line.startswith("instruction probes"):
            section = "insn"
        elif line and not line.startswith(" "):
            section = None
        elif section == "insn":
            m = re.match(r"^  (\S+)\s+(.*?) \(x\d+ per iteration\)", line)
            if m and not re.search(r"exit|cpuid|baseline", m.group(2), re.I):
                probes[m.group(1)] = len(m.group(2).split(" that ")[0].split(";"))
    return counts, probes


def walk(funcs, by_addr, start, ptr, depth=0):
    """Executed instruction count of `start` (its ret included) on the oracle's path, or None."""
    insns = funcs[start]
    i, n, prev = 0, 0, ""
    pvops = [f for f in funcs if f.startswith("irqbench_pv_")]
    while i < len(insns) and n < 200:
        addr, op, args = insns[i]
        n += 1
        if op.startswith("ret"):
            return n
        if op.startswith("call"):
            target = None
            m = re.match(r"^0x([0-9a-f]+)$", args)
            if m and int(m.group(1), 16) in by_addr:
                target = by_addr[int(m.group(1), 16)][0]
            elif args.startswith("*"):
                # A pv-op through the table: disasm names the callees in call order.
                target = call_by_order(pvops, ptr, start)
            if target is None or depth > 2:
                return None
            sub = walk(funcs, by_addr, target, ptr, depth + 1)
            if sub is None:
                return None
            n += sub
            i += 1
            prev = op + " " + args
            continue
        if op.startswith("j"):
            taken = branch_taken(op, prev)
            if taken is None:
                return None
            if taken:
                dest = int(args.split()[0], 16)
                if dest not in by_addr or by_addr[dest][0] != start:
                    return None
                i = by_addr[dest][1]
                prev = ""
                continue
        i += 1
        prev = op + " " + args
    return None


def call_by_order(pvops, ptr, start):
    """The k-th pv-op call of a strategy: save_fl, irq_disable, then restore_fl or irq_enable."""
    k = ptr.get(start, 0)
    ptr[start] = k + 1
    names = ["irqbench_pv_save_fl", "irqbench_pv_irq_disable"]
    last = "irqbench_pv_restore_fl" if "popf" in start else "irqbench_pv_irq_enable"
    name = names[k] if k < 2 else last
    return name if name in pvops else None


def branch_taken(op, prev):
    """The oracle's path: body count 0, IF set when saved, virtual mask clear, nothing pending."""
    jz = op in ("je", "jz")
    jnz = op in ("jne", "jnz")
    if op == "jmp":
        return True
    if prev.startswith("test %ecx,%ecx") or prev.startswith("dec %ecx"):
        return jz if (jz or jnz) else None  # zero body ops: the loop is skipped
    if prev.startswith("test $0x200,"):
        return jnz if (jz or jnz) else None  # IF was set
    if prev.startswith("test %al,%al"):
        return jz if (jz or jnz) else None  # the saved virtual mask was 0
    if re.match(r"cmpb\s+\$0,%gs:0x179", prev):
        return jz if (jz or jnz) else None  # nothing pending
    return None


def oracle(j, out, irqbench):
    """VMX box: the TSC ticks once per instruction, so net cycles/op are instruction counts."""
    counts, probes = expected_insns(irqbench)
    base = counts.get("empty")
    for f in ["quick", "strategies", "insn-cost"]:
        r = load(os.path.join(out, f"{f}.json"))
        if isinstance(r, Exception):
            continue
        for x in r["results"]:
            med = (x["cycles_per_op"] or {}).get("median")
            s = x["strategy"]
            note = ""
            if x["kind"] == "insn":
                want = probes.get(s)
                why = "an exit: its cost is the L1 host's instructions, not an instruction count"
                if s in ORACLE_EXPLAINED and want is not None:
                    listed = want
                    want, reason = ORACLE_EXPLAINED[s]
                    note = f" (`list` says {listed}: {reason})"
            else:
                want = None if counts.get(s) is None or base is None else counts[s] - base
                why = "the disasm path could not be followed"
                # The body loop is the `empty` baseline's too, so it cancels whatever its length;
                # nesting and interrupt load mix in other paths.
                if x["nesting"] != 0 or x["irq_source"] != "none":
                    want, why = None, "not a nesting-0, no-load row"
            if want is None:
                if s != "empty":
                    j.item(None, f"oracle {x['name']}", f"{med} cycles/op, not checked: {why}")
                continue
            ok = med is not None and abs(med - want) < 0.01
            j.item(ok, f"oracle {x['name']}", f"{med} cycles/op, disasm/list say {want:g} instructions{note}")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--flavour", required=True, choices=["svm", "vmx"])
    ap.add_argument("--suite", default="full")
    ap.add_argument("--irqbench", required=True)
    ap.add_argument("out")
    a = ap.parse_args()
    j = Judge(a.flavour)
    print(f"== flavour-box report ({a.flavour}, suite {a.suite})")
    steps(j, a.out)
    validate(j, a.out)
    if os.path.exists(os.path.join(a.out, "fc-main.json")):
        checklist(j, a.out)
    if a.flavour == "vmx":
        oracle(j, a.out, a.irqbench)
    tests(j, a.out)
    print(f"flavour-box report: {'FAIL' if j.failed else 'PASS'} ({j.failed} unexpected failures)")
    return 1 if j.failed else 0


if __name__ == "__main__":
    sys.exit(main())
