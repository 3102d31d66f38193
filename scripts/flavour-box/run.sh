#!/usr/bin/env bash
# scripts/flavour-box/run.sh: irqbench on a real kvm_amd (SVM, under QEMU TCG) or kvm_intel (VMX,
# under Bochs), on a machine that has neither. See --help.
set -euo pipefail

usage() {
    cat <<'EOF'
Usage: scripts/flavour-box/run.sh [OPTIONS] svm|vmx [COMMAND...]

Boots a stock Debian kernel in an emulator whose CPU has SVM (QEMU TCG, -cpu EPYC,+svm,+npt) or
VMX (Bochs 2.7, corei7_skylake_x), loads kvm_amd or kvm_intel there, and runs irqbench against
that /dev/kvm: the same kvm.ko / kvm-amd.ko / kvm-intel.ko code users run, on this PVM machine.

With COMMAND, runs it in the box (from the vmm/ folder, `irqbench` on PATH, /box/out to leave
files in) and exits with its status; its output (stdout and stderr) is printed here complete,
never mixed with kernel messages. Without COMMAND, runs the default suite (below) and judges it.

Options:
  --suite full|ci   the default suite's size (default: full; .ci/run uses ci)
  --timeout SECS    bound on the box's whole life (default: svm 1800, vmx 1800); on expiry the
                    emulator is killed and the script exits 124
  --smp N           vCPUs of the box (default 1; svm only). At -smp 2 multi-threaded TCG hangs
                    the box's kernel in `irqbench validate`: see docs/FLAVOURS.md
  --mem MB          memory of the box (default svm 3072, vmx 2048, Bochs' maximum)
  --console         print the box's kernel console (ttyS0) here as well
  --bochs-cpu MODEL the Bochs CPU model of the vmx box (default corei7_skylake_x; `bochs -help
                    cpu` lists them). Tried 2026-12-04: corei3_cnl boots too; corei7_icelake_u
                    and tigerlake do not (no console in 7 min). No model of Bochs 2.7 has posted
                    interrupts, so kvm_intel loads with enable_apicv = N on each: docs/FLAVOURS.md
  -h, --help        this text

The default suite (full): `irqbench host`, the KVM module parameters, `irqbench validate`,
`run quick`, `run insn-cost`, `run strategies` (all --no-save --force, so that a validation
FAIL still leaves the figures to judge; on the emulated CPU the TSC checks are NOT JUDGED), the docs/FLAVOURS.md
checklist (window exits under inject, LAPIC ticks, the port/vmcall/vapic-poll hypercalls), then
every test binary of the workspace with IRQBENCH_REQUIRE_KVM=1 --test-threads=1, ending with one
"tests: N passed, N failed" line. On the host, scripts/flavour-box/report.py then checks the
checklist's items and, on vmx, the instruction-count oracle: Bochs' TSC ticks once per
instruction (cpu ips=200000000 with tsc_early_khz=200000), so every strategy's and probe's net
cycles/op must equal its instruction count from `irqbench disasm` / `irqbench list`.
  --suite ci: svm runs everything but insn-cost and strategies; vmx runs every step but only
  the named test subset in scripts/flavour-box/vmx-tests (the flavour-dependent tests, less six
  that spend seconds of measuring budget on the VMM's own logic: Bochs runs host code far
  slower than TCG, and a second of budget is 200M instructions it emulates), and packs only
  the test binaries that subset names.
Failures the emulators cause (not KVM, not irqbench) are listed by name with their reason in
scripts/flavour-box/report.py (KNOWN_EMULATOR); anything else fails the run.

What it needs, installed with apt-get if missing: qemu-system-x86 busybox-static cpio kmod
(svm); bochs bochsbios vgabios isolinux syslinux-common xorriso busybox-static cpio kmod (vmx).
The kernel package (linux-image-amd64's dependency) is fetched with `apt-get download` and
unpacked with `dpkg-deb -x` into target/flavour-box/kernel/ - never installed. It builds
`cargo build --release -p irqbench` and `cargo test --workspace --no-run`. Everything is cached
under target/flavour-box/, so a second run only repacks what changed. One box of each flavour
at a time per checkout (a lock under target/flavour-box/); an svm and a vmx box may run side by
side, their set-up (apt, the kernel package, cargo) one after the other.

Time (measured 2026-12-02 on the 2-core CI machine, --suite ci, the two side by side as .ci/run
runs them): svm 373-433 s, vmx 301-416 s in the emulator; the whole .ci/run 12-14 min. Alone:
svm 544 s; vmx boots in ~100 s (Bochs loads the 55 MB initramfs through its BIOS; compressing
it gained nothing, as the kernel then unpacks it in emulation). On a host in a slow state both
took up to twice as long (2026-12-02, AMD EPYC: svm 625 s, vmx 843 s, one after the other).

Examples:
  scripts/flavour-box/run.sh svm                          # the default suite on kvm_amd
  scripts/flavour-box/run.sh svm irqbench validate        # one command
  scripts/flavour-box/run.sh --console svm sh -c 'dmesg | tail'
  scripts/flavour-box/run.sh vmx irqbench disasm native-popf
  scripts/flavour-box/run.sh --suite ci vmx               # what CI runs
Exit status: the command's (default suite: 0 when every step passed), 124 on timeout, 125 when
the box could not be built or booted.
EOF
}

die() { echo "flavour-box: $*" >&2; exit 125; }
say() { echo "flavour-box: $*" >&2; }

suite=full timeout= smp=1 mem= console=0 bochs_cpu=corei7_skylake_x
while [ $# -gt 0 ]; do
    case "$1" in
        -h | --help) usage; exit 0 ;;
        --suite) suite=${2:?--suite needs full or ci}; shift 2 ;;
        --timeout) timeout=${2:?--timeout needs seconds}; shift 2 ;;
        --smp) smp=${2:?--smp needs a number}; shift 2 ;;
        --mem) mem=${2:?--mem needs megabytes}; shift 2 ;;
        --console) console=1; shift ;;
        --bochs-cpu) bochs_cpu=${2:?--bochs-cpu needs a model}; shift 2 ;;
        svm | vmx) break ;;
        *) echo "flavour-box: unknown option or flavour '$1' (want svm or vmx; see --help)" >&2; exit 2 ;;
    esac
done
[ $# -gt 0 ] || { echo "flavour-box: name a flavour: svm or vmx (see --help)" >&2; exit 2; }
flavour=$1
shift
case "$suite" in full | ci) ;; *) echo "flavour-box: --suite '$suite': want full or ci" >&2; exit 2 ;; esac
for n in "${timeout:-1}" "$smp" "${mem:-1}"; do
    case "$n" in '' | *[!0-9]*) echo "flavour-box: '$n' is not a whole number" >&2; exit 2 ;; esac
done
case "$bochs_cpu" in '' | *[!a-z0-9_]*) echo "flavour-box: --bochs-cpu '$bochs_cpu': want a model name from \`bochs -help cpu\`" >&2; exit 2 ;; esac
[ "$flavour" = svm ] && [ "$bochs_cpu" != corei7_skylake_x ] && { echo "flavour-box: --bochs-cpu applies to vmx only" >&2; exit 2; }
[ "$flavour" = vmx ] && [ "$smp" != 1 ] && { echo "flavour-box: --smp applies to svm only" >&2; exit 2; }
timeout=${timeout:-1800}
if [ "$flavour" = svm ]; then mem=${mem:-3072}; else mem=${mem:-2048}; fi
[ "$flavour" = vmx ] && [ "$mem" -gt 2048 ] && { echo "flavour-box: Bochs takes at most 2048 MB" >&2; exit 2; }

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cd "$repo"
cache=$repo/target/flavour-box
mkdir -p "$cache"
mkdir -p "$cache/$flavour"
# One box per flavour at a time per checkout: a second would rebuild the first one's initramfs
# and logs under it. An svm and a vmx box may run side by side (.ci/run does: each emulator keeps
# one CPU busy), but their set-up below (apt, the kernel package, cargo) is one at a time.
exec 9>"$cache/lock-$flavour"
flock -n 9 || die "another flavour-box/run.sh $flavour is running on $cache (its lock: $cache/lock-$flavour)"
exec 8>"$cache/setup.lock"
if ! flock -n 8; then
    say "waiting (at most 30 min) for the other box's set-up (apt, kernel package, cargo)"
    flock -w 1800 8 || die "the other box's set-up held $cache/setup.lock for 30 min"
fi

# ---- packages (apt only) ----------------------------------------------------------------------
need_pkgs() {
    local missing=()
    for p in "$@"; do [[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" == *'ok installed'* ]] || missing+=("$p"); done
    [ ${#missing[@]} -eq 0 ] && return 0
    say "installing ${missing[*]} (apt-get)"
    local sudo=
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    $sudo apt-get update -qq 8>&- 9>&- || true
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}" >&2 8>&- 9>&- ||
        die "apt-get install ${missing[*]} failed"
}
if [ "$flavour" = svm ]; then
    need_pkgs qemu-system-x86 busybox-static cpio kmod
else
    need_pkgs bochs bochsbios vgabios isolinux syslinux-common xorriso busybox-static cpio kmod
fi

# ---- the kernel package: downloaded and unpacked, never installed ------------------------------
kernel_pkg() {
    apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ { print $2; exit }'
}
kpkg=$(kernel_pkg)
[ -n "$kpkg" ] || kpkg=$(ls "$cache/kernel" 2>/dev/null | tail -1)
[ -n "$kpkg" ] || die "cannot name the kernel package (apt-cache depends linux-image-amd64 says nothing)"
kdir=$cache/kernel/$kpkg
if [ ! -e "$kdir/.done" ]; then
    say "fetching $kpkg (apt-get download; unpacked under $kdir, not installed)"
    rm -rf "$kdir" && mkdir -p "$kdir/deb"
    (cd "$kdir/deb" && apt-get download -q "$kpkg" >&2 8>&- 9>&-) || die "apt-get download $kpkg failed"
    dpkg-deb -x "$kdir"/deb/*.deb "$kdir" || die "dpkg-deb -x failed"
    rm -rf "$kdir/deb"
    touch "$kdir/.done"
fi
kver=$(ls "$kdir/lib/modules" | sed -n 1p)
vmlinuz=$kdir/boot/vmlinuz-$kver
[ -r "$vmlinuz" ] || die "no kernel image in $kdir/boot"
[ -e "$kdir/lib/modules/$kver/modules.dep" ] || /sbin/depmod -b "$kdir" "$kver" || die "depmod failed"

# ---- the binaries -------------------------------------------------------------------------------
say "building irqbench (release) and the workspace's test binaries"
# Without the lock fds: a daemon a build starts (a compiler cache's server) must not hold them.
cargo build --release -q -p irqbench 8>&- 9>&- || die "cargo build --release failed"
cargo test --workspace --no-run --message-format=json 2>/dev/null 8>&- 9>&- >"$cache/$flavour/test-build.json" ||
    die "cargo test --workspace --no-run failed (run it to see why)"
# "<package dir> <executable>" per test binary; and CARGO_BIN_EXE_irqbench, which the CLI tests run.
python3 - "$cache/$flavour/test-build.json" >"$cache/$flavour/tests.list" <<'PY'
import json, os, sys
for line in open(sys.argv[1]):
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable"):
        if m["profile"]["test"]:
            print("test", os.path.dirname(m["manifest_path"]), m["executable"])
        elif m["target"]["kind"] == ["bin"]:
            print("bin", os.path.dirname(m["manifest_path"]), m["executable"])
PY
grep -q '^test ' "$cache/$flavour/tests.list" || die "cargo listed no test binaries"
exec 8>&- # the set-up is done: the other flavour's may start

# ---- the initramfs ------------------------------------------------------------------------------
root=$cache/$flavour/root
rm -rf "$root"
mkdir -p "$root"/{bin,proc,sys,dev,tmp,box/out,root}
cp /bin/busybox "$root/bin/busybox"
ln -s busybox "$root/bin/sh"
cp "$here/init" "$root/init"
cp "$here/suite.sh" "$root/box/suite.sh"

# A binary at its own absolute path (tests find files by compile-time paths), stripped, with the
# shared libraries ldd names.
add_elf() {
    local src=$1 dst=$root$2
    mkdir -p "$(dirname "$dst")"
    strip -o "$dst" "$src" 2>/dev/null || cp "$src" "$dst"
    ldd "$src" 2>/dev/null | grep -oE '/[^ ]+' | while read -r lib; do
        [ -e "$root$lib" ] || { mkdir -p "$root$(dirname "$lib")" && cp -L "$lib" "$root$lib"; }
    done
}
add_elf target/release/irqbench /bin/irqbench
# A named test subset (--suite ci vmx) leaves out the test binaries none of whose tests it names:
# Bochs reads the whole initramfs through its BIOS, at ~5 s a megabyte.
filters=
if [ "$suite" = ci ] && [ "$flavour" = vmx ]; then
    cp "$here/vmx-tests" "$root/box/test-filter"
    filters=$(grep -v '^#' "$here/vmx-tests")
fi
set -f # the filters are words, never globs
: >"$root/box/tests"
while read -r kind dir exe; do
    if [ "$kind" = test ] && [ -n "$filters" ]; then
        # The whole list, then a look at it (a reader that stops early breaks the lister's pipe).
        # shellcheck disable=SC2086 # the filters are words
        tests=$(cd "$dir" && "$exe" --list $filters) || die "$exe --list failed"
        grep -q ': test$' <<<"$tests" || continue
    fi
    add_elf "$exe" "$exe"
    [ "$kind" = test ] && echo "$dir $exe" >>"$root/box/tests"
done <"$cache/$flavour/tests.list"
# Every filter must still name a test (a renamed one would otherwise drop out unseen), every
# --skip too; `--list` with all the filters shows the kept tests, so each is looked for alone.
if [ -n "$filters" ]; then
    all=
    while read -r kind dir exe; do
        [ "$kind" = test ] || continue
        all+=$(cd "$dir" && "$exe" --list) || die "$exe --list failed"
        all+=$'\n'
    done <"$cache/$flavour/tests.list"
    for f in $filters; do
        [ "$f" = --skip ] && continue
        # No `grep -q` in a pipe: under pipefail its early exit fails the writer with SIGPIPE
        # whenever the writer has more to write (CI lost a box to that once).
        grep -F -- "$f" <<<"$all" | grep ': test$' >/dev/null ||
            die "scripts/flavour-box/vmx-tests: '$f' names no test of the workspace (renamed?)"
    done
    [ -s "$root/box/tests" ] || die "scripts/flavour-box/vmx-tests names no test"
fi
set +f
# The repository files the tests read: configs/ (the shipped configs and their README),
# vmm/src (the layering test reads the sources), found through CARGO_MANIFEST_DIR, which is this
# checkout's absolute path.
mkdir -p "$root$repo/vmm"
cp -r configs "$root$repo/configs"
# README.md and docs/: the doc-example test runs their shell examples and checks their links.
cp README.md "$root$repo/"
cp -r docs "$root$repo/docs"
cp -r vmm/src "$root$repo/vmm/src"
# The test fixtures (a results file of the previous schema the converter tests read).
mkdir -p "$root$repo/vmm/tests"
cp -r vmm/tests/fixtures "$root$repo/vmm/tests/fixtures"
for d in vmm abi; do mkdir -p "$root$repo/$d"; cp "$d/Cargo.toml" "$root$repo/$d/"; done
mkdir -p "$root$repo/target/tmp"

# Modules in load order, dependencies first (modules.dep), paths inside the box.
if [ "$flavour" = svm ]; then mods="kvm-amd"; else mods="kvm-intel"; fi
dep=$kdir/lib/modules/$kver/modules.dep
resolve() {
    local m line
    line=$(grep -E "(^|/)$1\.ko(\.[a-z]+)?:" "$dep") || die "module $1 not in modules.dep"
    for m in ${line#*:}; do resolve "$(basename "${m%%.ko*}")"; done
    grep -qx "/lib/modules/$kver/${line%%:*}" "$root/box/modules" 2>/dev/null ||
        echo "/lib/modules/$kver/${line%%:*}" >>"$root/box/modules"
}
: >"$root/box/modules"
for m in $mods; do resolve "$m"; done
while read -r m; do mkdir -p "$root$(dirname "$m")"; cp "$kdir$m" "$root$m"; done <"$root/box/modules"

# The command: each word single-quoted for the box's sh; none means the default suite.
{
    if [ $# -eq 0 ]; then
        echo "exec sh /box/suite.sh"
    else
        printf 'exec'
        for a in "$@"; do printf " '%s'" "${a//\'/\'\\\'\'}"; done
        echo
    fi
} >"$root/box/cmd"
printf 'export BOX_SUITE=%s BOX_FLAVOUR=%s BOX_CWD=%s\n' "$suite" "$flavour" "$repo/vmm" >"$root/box/env"

initrd=$cache/$flavour/initrd.cpio
(cd "$root" && find . | cpio -o -H newc --quiet) >"$initrd"
say "initramfs: $(du -m "$initrd" | cut -f1) MB"

# ---- boot ---------------------------------------------------------------------------------------
work=$cache/$flavour/run
rm -rf "$work" && mkdir -p "$work"
: >"$work/console.log" && : >"$work/out.log" && : >"$work/art.log"
cmdline="console=ttyS0 loglevel=4 panic=-1 rdinit=/init"
emu_pid= tail_pid= console_pid=
cleanup() {
    for p in $tail_pid $console_pid; do kill "$p" 2>/dev/null || true; done
    tail_pid= console_pid=
    if [ -n "$emu_pid" ] && kill -0 "$emu_pid" 2>/dev/null; then
        kill "$emu_pid" 2>/dev/null; sleep 1; kill -9 "$emu_pid" 2>/dev/null
    fi
    return 0
}
trap cleanup EXIT
trap 'cleanup; exit 130' INT
trap 'cleanup; exit 143' TERM

if [ "$flavour" = svm ]; then
    qemu-system-x86_64 -accel tcg -cpu EPYC,+svm,+npt -smp "$smp" -m "$mem" \
        -nographic -nodefaults -no-reboot -monitor none \
        -serial "file:$work/console.log" -serial "file:$work/out.log" -serial "file:$work/art.log" \
        -kernel "$vmlinuz" -initrd "$initrd" -append "$cmdline" >"$work/emulator.log" 2>&1 &
    emu_pid=$!
else
    # Bochs boots from a CD: isolinux loads the kernel and the initramfs.
    iso=$work/box.iso
    mkdir -p "$work/iso/isolinux"
    cp /usr/lib/ISOLINUX/isolinux.bin /usr/lib/syslinux/modules/bios/ldlinux.c32 "$work/iso/isolinux/"
    cp "$vmlinuz" "$work/iso/vmlinuz"
    ln "$initrd" "$work/iso/initrd" 2>/dev/null || cp "$initrd" "$work/iso/initrd"
    printf 'DEFAULT box\nPROMPT 0\nLABEL box\n  KERNEL /vmlinuz\n  APPEND initrd=/initrd %s tsc_early_khz=200000 tsc=reliable\n' \
        "$cmdline" >"$work/iso/isolinux/isolinux.cfg"
    xorriso -as mkisofs -quiet -o "$iso" -b isolinux/isolinux.bin -c isolinux/boot.cat \
        -no-emul-boot -boot-load-size 4 -boot-info-table "$work/iso" 2>"$work/xorriso.log" ||
        die "xorriso failed: $(tail -3 "$work/xorriso.log")"
    cat >"$work/bochsrc" <<EOF
megs: $mem
cpu: model=$bochs_cpu, count=1, ips=200000000, reset_on_triple_fault=0
clock: sync=none, time0=local
romimage: file=/usr/share/bochs/BIOS-bochs-latest
vgaromimage: file=/usr/share/vgabios/vgabios.bin
display_library: rfb, options="timeout=0"
ata1: enabled=1, ioaddr1=0x170, ioaddr2=0x370, irq=15
ata1-master: type=cdrom, path="$iso", status=inserted
boot: cdrom
com1: enabled=1, mode=file, dev="$work/console.log"
com2: enabled=1, mode=file, dev="$work/out.log"
com3: enabled=1, mode=file, dev="$work/art.log"
speaker: enabled=0
sound: waveoutdrv=dummy, waveindrv=dummy, midioutdrv=dummy
log: $work/bochs.log
panic: action=fatal
error: action=report
info: action=ignore
debug: action=ignore
EOF
    echo c >"$work/bochs.rc"
    bochs -q -f "$work/bochsrc" -rc "$work/bochs.rc" >"$work/emulator.log" 2>&1 </dev/null &
    emu_pid=$!
fi
t0=$(date +%s)
say "$flavour box booting (emulator pid $emu_pid, timeout ${timeout}s; logs in $work)"
tail -n +1 -F "$work/out.log" 2>/dev/null &
tail_pid=$!
if [ "$console" = 1 ]; then
    tail -n +1 -F "$work/console.log" >&2 &
    console_pid=$!
fi

status=
while kill -0 "$emu_pid" 2>/dev/null; do
    status=$(sed -n 's/^@@status \([0-9]*\).*/\1/p' "$work/art.log" | tail -1)
    [ -n "$status" ] && break
    if [ $(($(date +%s) - t0)) -ge "$timeout" ]; then
        say "timeout after ${timeout}s: killing the emulator (pid $emu_pid); console tail:"
        tail -20 "$work/console.log" >&2
        exit 124
    fi
    sleep 1
done
# The power-off follows the status line; give the emulator a few seconds, then kill it.
for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$emu_pid" 2>/dev/null || break; sleep 1; done
sleep 0.5
cleanup
emu_pid=
elapsed=$(($(date +%s) - t0))
if [ -z "$status" ]; then
    status=$(sed -n 's/^@@status \([0-9]*\).*/\1/p' "$work/art.log" | tail -1)
fi
if [ -z "$status" ]; then
    say "the box stopped without a status line after ${elapsed}s; console tail:"
    tail -30 "$work/console.log" >&2
    grep -E 'PANIC|>>|rror' "$work/emulator.log" | tail -5 >&2
    tail -3 "$work/emulator.log" >&2
    exit 125
fi
rm -rf "$work/out" && mkdir -p "$work/out"
sed -n '/^@@artifacts-begin/,/^@@artifacts-end/p' "$work/art.log" | sed '1d;$d' | base64 -d |
    tar -C "$work/out" -xf - 2>/dev/null || say "the box's files did not come back whole"
say "$flavour box: command exit $status, ${elapsed}s in the emulator"
if [ $# -eq 0 ]; then
    # The suite's own status counts every failure, the emulators' included: the report judges.
    status=0
    python3 "$here/report.py" --flavour "$flavour" --suite "$suite" \
        --irqbench target/release/irqbench "$work/out" || status=1
fi
exit "$status"
