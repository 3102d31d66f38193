#!/bin/sh
# The flavour box's default suite (busybox sh, inside the box). Each step prints a header and a
# closing "==== <step>: exit N (T s)" line; its exit status also goes to /box/out/steps, and its
# JSON reports to /box/out, for scripts/flavour-box/report.py on the host to judge.
# $BOX_SUITE: full (every step, every test) or ci (see run.sh --help).
out=/box/out
B=/bin/irqbench
export XDG_DATA_HOME=/tmp/xdg HOME=/tmp/home

step() {
    name=$1
    shift
    echo "==== $name: $*"
    t0=$(date +%s)
    "$@"
    rc=$?
    echo "==== $name: exit $rc ($(($(date +%s) - t0)) s)"
    echo "$name $rc" >>$out/steps
}

params() {
    for p in kvm/parameters/min_timer_period_us kvm/parameters/enable_pmu \
        kvm_intel/parameters/enable_apicv kvm_intel/parameters/preemption_timer \
        kvm_intel/parameters/ept kvm_intel/parameters/vpid kvm_amd/parameters/avic \
        kvm_amd/parameters/npt; do
        [ -r /sys/module/$p ] && echo "$p = $(cat /sys/module/$p)"
    done
    grep -m1 -E 'vendor_id|model name' /proc/cpuinfo
    grep -m1 -o -w -E 'svm|vmx' /proc/cpuinfo
    return 0
}

validate() { $B validate >$out/validate.txt 2>&1; rc=$?; cat $out/validate.txt; return $rc; }

run() {
    $B run "$1" --no-save --force --json "$out/$1.json"
}

# The checklist counts what the loads cause (window exits, ticks, hypercalls), so its groups run
# at least 200 rounds: a group ends once its cycles are precise, which a steady emulator reaches
# within 20 rounds, and 20 rounds once held no pv-event hypercall at all.
checklist() {
    cat >/tmp/fc-main.toml <<'TOML'
name = "fc-main"
[run]
max_seconds = 1
min_rounds = 200
[[bench]]
name = "window"
strategies = ["native-popf", "native-cli-sti", "pvop-skip"]
nesting = [0.5]
irq = [{ source = "inject", rate_hz = 5000 }]
[[bench]]
name = "ticks"
strategies = ["native-popf"]
irq = [{ source = "lapic-timer", period_us = 200 }]
TOML
    # Each run's own status is a step line too (checklist-fc-NAME), so the report names the
    # run that failed and its exit status, not only the checklist.
    rc=0
    for hc in main port vmcall vapic-poll; do
        if [ $hc != main ]; then
            printf 'name = "fc-%s"\n[run]\nmax_seconds = 1\nmin_rounds = 200\nhypercall = "%s"\n[[bench]]\nname = "hcall"\nstrategies = ["vif-restore"]\nirq = [{ source = "pv-event", rate_hz = 5000 }]\n' \
                $hc $hc >/tmp/fc-$hc.toml
        fi
        $B run /tmp/fc-$hc.toml -q --no-save --force --json $out/fc-$hc.json
        r=$?
        echo "checklist-fc-$hc $r" >>$out/steps
        [ $r = 0 ] || rc=1
    done
    return $rc
}

# Every test binary of the workspace (/box/tests: "<package dir> <binary>"), one thread, KVM
# and tracefs's kvm_exit events required (the box is root with tracefs mounted), from the
# package's folder as cargo runs them. Filters (one per line) name a subset.
tests() {
    filters=
    [ -s /box/test-filter ] && filters=$(grep -v '^#' /box/test-filter)
    set -f # the filters are words, never globs
    : >$out/tests.txt
    while read -r dir bin; do
        echo "---- $bin"
        # shellcheck disable=SC2086 # the filters are words
        # Its exit status goes to the file too (a binary that crashed names no failed test).
        (cd "$dir" && IRQBENCH_REQUIRE_KVM=1 IRQBENCH_REQUIRE_TRACE=1 "$bin" --test-threads=1 $filters; echo "@@exit $bin $?") 2>&1 | tee -a $out/tests.txt
    done </box/tests
    awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
         END { printf "tests: %d passed, %d failed\n", p, f; exit f > 0 }' $out/tests.txt
}

: >$out/steps
step host $B host
step params params
step validate validate
step run-quick run quick
# The svm box's ci suite leaves out the two long measuring configs (TCG's cycles are no
# hardware's); the vmx box keeps them: they are the instruction-count oracle's rows.
if [ "$BOX_SUITE" = full ] || [ "$BOX_FLAVOUR" = vmx ]; then
    step run-insn-cost run insn-cost
    step run-strategies run strategies
fi
step checklist checklist
step tests tests
