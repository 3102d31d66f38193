//! `run --trace-exits`: KVM's own exits of the vCPU threads by hardware exit reason, from the
//! `kvm:kvm_exit` and `kvm:kvm_entry` tracepoints (VMX and SVM have them; PVM does not fire
//! them). Each exit is paired with the same thread's next entry, as `perf kvm stat` pairs
//! them: that span is KVM's in-kernel handling, plus the VMM's for exits KVM passes on.
//!
//! A private tracefs instance (`instances/irqbench-PID`) keeps the host's own tracing as it
//! was; its events are filtered to the vCPU thread ids (`set_event_pid`) and its clock is the
//! TSC (`x86-tsc`), which the text output prints in raw ticks, finer than the default clock's
//! microseconds.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::results::{HandlingTime, TracedExit};

/// Where tracefs is mounted, in the order tried.
const TRACEFS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];
/// Per-CPU ring buffer of the instance: ~200 000 events per CPU before the oldest are
/// overwritten (the instance's `overrun` counts them; the note says so).
const BUFFER_KB: u32 = 16 * 1024;
/// At most this much of the trace is read: ~40 bytes an event more than fills the buffers of
/// a few CPUs.
const MAX_TRACE_BYTES: u64 = 256 << 20;
/// KVM's interrupt-window exit as the tracepoint names it: VMX's `INTERRUPT_WINDOW`, SVM's
/// `vintr` (the `VMX_EXIT_REASONS`/`SVM_EXIT_REASONS` tables of arch/x86/include/uapi).
pub const WINDOW_EXIT_REASONS: [&str; 2] = ["INTERRUPT_WINDOW", "vintr"];
/// The same, as a site's `reason` in the report: KVM's, not the VMM's.
const WINDOW_SITE_REASONS: [&str; 2] = ["kvm:INTERRUPT_WINDOW", "kvm:vintr"];
/// At most this many distinct window-exit RIPs are kept a group (the guest's code is smaller).
const MAX_WINDOW_RIPS: usize = 4096;

#[derive(Debug, Error)]
pub enum TraceError {
    #[error(
        "needs root (running as uid {0}): tracefs and its event controls are \
         root's"
    )]
    NotRoot(u32),
    #[error(
        "needs a mounted tracefs: neither /sys/kernel/tracing nor \
         /sys/kernel/debug/tracing is one (mount -t tracefs nodev /sys/kernel/tracing)"
    )]
    NoTracefs,
    #[error(
        "this host's KVM has no kvm:kvm_exit/kvm:kvm_entry tracepoints ({} is missing; the \
         kvm module is not loaded, or PVM)",
        .0.display()
    )]
    NoTracepoints(PathBuf),
    #[error("{what} {}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

fn io_err<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> TraceError + 'a {
    move |source| TraceError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

fn write(path: &Path, value: &str) -> Result<(), TraceError> {
    fs::write(path, value).map_err(io_err("cannot write", path))
}

/// A tracefs instance recording the vCPU threads' exits and entries.
#[derive(Debug)]
pub struct ExitTracer {
    dir: PathBuf,
    tids: HashSet<u32>,
    /// The instance runs on the TSC clock: timestamps are ticks, converted with this.
    tsc_khz: Option<u64>,
}

/// What one traced stretch found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TraceCounts {
    pub exits: Vec<TracedExit>,
    /// Events the ring buffer overwrote before they were read (the counts miss them).
    pub overrun: u64,
    /// The trace was longer than [`MAX_TRACE_BYTES`] and was cut there.
    pub truncated: bool,
    /// Interrupt-window exits by (reason, guest RIP) ([`window_exit_rips`]).
    pub window_rips: WindowRips,
}

/// The mounted tracefs with KVM's tracepoints, or why there is none usable.
fn tracefs() -> Result<PathBuf, TraceError> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    if euid != 0 {
        return Err(TraceError::NotRoot(euid));
    }
    let root = TRACEFS
        .iter()
        .map(PathBuf::from)
        .find(|p| p.join("tracing_on").exists())
        .ok_or(TraceError::NoTracefs)?;
    for event in ["kvm_exit", "kvm_entry"] {
        let path = root.join("events/kvm").join(event);
        if !path.exists() {
            return Err(TraceError::NoTracepoints(path));
        }
    }
    Ok(root)
}

/// The thread ids of this process's vCPU threads (named `vcpuN` by the session).
pub fn vcpu_tids() -> Vec<u32> {
    let Ok(tasks) = fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    tasks
        .filter_map(|t| {
            let t = t.ok()?;
            let tid: u32 = t.file_name().to_str()?.parse().ok()?;
            let comm = super::read_fact(&t.path().join("comm")).ok()?;
            comm.starts_with("vcpu").then_some(tid)
        })
        .collect()
}

impl ExitTracer {
    /// Starts recording the exits of threads `tids`; `tsc_khz` converts the TSC clock's ticks.
    pub fn start(tids: &[u32], tsc_khz: u64) -> Result<ExitTracer, TraceError> {
        let root = tracefs()?;
        let dir = root.join(format!("instances/irqbench-{}", std::process::id()));
        if !dir.exists() {
            fs::create_dir(&dir).map_err(io_err("cannot create the tracefs instance", &dir))?;
        }
        let mut tracer = ExitTracer {
            dir,
            tids: tids.iter().copied().collect(),
            tsc_khz: None,
        };
        let d = tracer.dir.clone();
        write(&d.join("tracing_on"), "0")?;
        write(&d.join("buffer_size_kb"), &BUFFER_KB.to_string())?;
        if tsc_khz > 0 && write(&d.join("trace_clock"), "x86-tsc").is_ok() {
            tracer.tsc_khz = Some(tsc_khz);
        }
        let pids: Vec<String> = tids.iter().map(u32::to_string).collect();
        write(&d.join("set_event_pid"), &pids.join(" "))?;
        write(&d.join("trace"), "")?;
        for event in ["kvm_exit", "kvm_entry"] {
            write(&d.join("events/kvm").join(event).join("enable"), "1")?;
        }
        write(&d.join("tracing_on"), "1")?;
        Ok(tracer)
    }

    /// Stops recording and counts what was recorded; the instance is removed.
    pub fn finish(self) -> Result<TraceCounts, TraceError> {
        write(&self.dir.join("tracing_on"), "0")?;
        let path = self.dir.join("trace");
        let mut text = Vec::new();
        fs::File::open(&path)
            .map_err(io_err("cannot open", &path))?
            .take(MAX_TRACE_BYTES + 1)
            .read_to_end(&mut text)
            .map_err(io_err("cannot read", &path))?;
        let truncated = text.len() as u64 > MAX_TRACE_BYTES;
        let text = String::from_utf8_lossy(&text);
        let (exits, window_rips) = read_exits(&text, &self.tids, self.tsc_khz);
        Ok(TraceCounts {
            exits,
            overrun: overrun(&self.dir),
            truncated,
            window_rips,
        })
    }
}

impl Drop for ExitTracer {
    fn drop(&mut self) {
        // Best effort: an instance left behind keeps its buffers allocated until rmdir.
        let _ = fs::write(self.dir.join("tracing_on"), "0");
        for event in ["kvm_exit", "kvm_entry"] {
            let _ = fs::write(self.dir.join("events/kvm").join(event).join("enable"), "0");
        }
        let _ = fs::remove_dir(&self.dir);
    }
}

/// Events overwritten in the instance's per-CPU buffers (`per_cpu/cpuN/stats`, `overrun:`).
fn overrun(dir: &Path) -> u64 {
    let Ok(cpus) = fs::read_dir(dir.join("per_cpu")) else {
        return 0;
    };
    cpus.filter_map(|c| {
        let text = super::read_fact(&c.ok()?.path().join("stats")).ok()?;
        text.lines()
            .find_map(|l| l.strip_prefix("overrun:"))
            .and_then(|n| n.trim().parse::<u64>().ok())
    })
    .sum()
}

/// One event of the trace: its thread, timestamp (ns), and for a `kvm_exit` its reason and
/// guest RIP (`None` for a `kvm_entry`).
struct Event<'a> {
    tid: u32,
    ns: f64,
    exit: Option<(&'a str, Option<u64>)>,
}

fn parse_line(line: &str, tsc_khz: Option<u64>) -> Option<Event<'_>> {
    let (head, event, rest) = if let Some(i) = line.find(": kvm_exit: ") {
        (&line[..i], true, &line[i + ": kvm_exit: ".len()..])
    } else {
        let i = line.find(": kvm_entry: ")?;
        (&line[..i], false, "")
    };
    // `  comm-TID  [CPU] flags  TIMESTAMP`: the comm may hold spaces and dashes.
    let bracket = head.find(" [")?;
    let tid = head[..bracket].trim().rsplit_once('-')?.1.parse().ok()?;
    let stamp = head.split_whitespace().last()?;
    let ns = match (stamp.contains('.'), tsc_khz) {
        (true, _) => stamp.parse::<f64>().ok()? * 1e9,
        (false, Some(khz)) => stamp.parse::<f64>().ok()? * 1e6 / khz as f64,
        (false, None) => stamp.parse::<f64>().ok()?,
    };
    let exit = if event {
        // `vcpu 0 reason EXTERNAL_INTERRUPT rip 0x… info1 …` (older kernels: `reason X rip …`).
        let after = rest.split_once("reason ")?.1;
        let mut words = after.split_whitespace();
        let reason = words.next()?;
        let rip = match (words.next(), words.next()) {
            (Some("rip"), Some(hex)) => u64::from_str_radix(hex.trim_start_matches("0x"), 16).ok(),
            _ => None,
        };
        Some((reason, rip))
    } else {
        None
    };
    Some(Event { tid, ns, exit })
}

/// Interrupt-window exits by (`kvm:` reason, the guest RIP they left).
pub type WindowRips = BTreeMap<(&'static str, u64), u64>;

/// KVM's interrupt-window exits of threads `tids` by (`kvm:` reason, the guest RIP they left),
/// for the guest's symbol table to name the code site (at most [`MAX_WINDOW_RIPS`] distinct
/// RIPs; an exit at one more is not counted).
pub fn window_exit_rips(text: &str, tids: &HashSet<u32>) -> WindowRips {
    read_exits(text, tids, None).1
}

/// Counts one exit into `rips` if it is a window exit with a RIP.
fn count_window(rips: &mut WindowRips, reason: &str, rip: Option<u64>) {
    let (Some(i), Some(rip)) = (WINDOW_EXIT_REASONS.iter().position(|r| *r == reason), rip) else {
        return;
    };
    let key = (WINDOW_SITE_REASONS[i], rip);
    if rips.len() < MAX_WINDOW_RIPS || rips.contains_key(&key) {
        *rips.entry(key).or_insert(0) += 1;
    }
}

/// Count and exit→entry time per reason, for the exits of threads `tids`.
pub fn pair_exits(text: &str, tids: &HashSet<u32>, tsc_khz: Option<u64>) -> Vec<TracedExit> {
    read_exits(text, tids, tsc_khz).0
}

/// One pass over the trace: [`pair_exits`] and [`window_exit_rips`].
fn read_exits(
    text: &str,
    tids: &HashSet<u32>,
    tsc_khz: Option<u64>,
) -> (Vec<TracedExit>, WindowRips) {
    #[derive(Default)]
    struct Tally {
        count: u64,
        timed: u64,
        sum: f64,
        min: f64,
        max: f64,
    }
    let mut tallies: BTreeMap<String, Tally> = BTreeMap::new();
    let mut open: HashMap<u32, (String, f64)> = HashMap::new();
    let mut windows = WindowRips::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some(Event { tid, ns, exit }) = parse_line(line, tsc_khz) else {
            continue;
        };
        if !tids.contains(&tid) {
            continue;
        }
        match exit {
            Some((reason, rip)) => {
                count_window(&mut windows, reason, rip);
                tallies.entry(reason.to_string()).or_default().count += 1;
                open.insert(tid, (reason.to_string(), ns));
            }
            None => {
                let Some((reason, at)) = open.remove(&tid) else {
                    continue;
                };
                let t = tallies.entry(reason).or_default();
                let d = (ns - at).max(0.0);
                t.min = if t.timed == 0 { d } else { t.min.min(d) };
                t.max = t.max.max(d);
                t.sum += d;
                t.timed += 1;
            }
        }
    }
    let mut exits: Vec<TracedExit> = tallies
        .into_iter()
        .map(|(reason, t)| TracedExit {
            reason,
            total: t.count,
            time_ns: (t.timed > 0).then(|| HandlingTime {
                min: t.min,
                mean: t.sum / t.timed as f64,
                max: t.max,
            }),
        })
        .collect();
    exits.sort_by(|a, b| b.total.cmp(&a.total).then_with(|| a.reason.cmp(&b.reason)));
    (exits, windows)
}

#[cfg(test)]
mod tests {
    use super::*;

    const VMX: &str = "\
# tracer: nop
#
#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION
           vcpu0-4242    [001] d..1.  1000000: kvm_exit: vcpu 0 reason EXTERNAL_INTERRUPT rip 0xffffffff81000000 info1 0x0 info2 0x0 intr_info 0x800000ec error_code 0x0
           vcpu0-4242    [001] d..1.  1002000: kvm_entry: vcpu 0, rip 0xffffffff81000000
 CPU 1/KVM-9-999     [000] d..1.  1002500: kvm_exit: vcpu 1 reason HLT rip 0x1 info1 0x0 info2 0x0
           vcpu0-4242    [001] d..1.  1003000: kvm_exit: vcpu 0 reason IO_INSTRUCTION rip 0x2 info1 0x0 info2 0x0
           vcpu0-4242    [001] d..1.  1009000: kvm_entry: vcpu 0, rip 0x3
           vcpu0-4242    [001] d..1.  1010000: kvm_exit: vcpu 0 reason EXTERNAL_INTERRUPT rip 0x4 info1 0x0
           vcpu0-4242    [001] d..1.  1011000: kvm_entry: vcpu 0, rip 0x4
           vcpu0-4242    [001] d..1.  1012000: kvm_exit: vcpu 0 reason EXTERNAL_INTERRUPT rip 0x5 info1 0x0
";

    #[test]
    fn exits_pair_with_the_same_threads_next_entry() {
        // TSC clock at 1 GHz: a tick is a nanosecond.
        let exits = pair_exits(VMX, &HashSet::from([4242]), Some(1_000_000));
        assert_eq!(
            exits.len(),
            2,
            "the other thread's HLT is filtered out: {exits:?}"
        );
        assert_eq!(exits[0].reason, "EXTERNAL_INTERRUPT");
        assert_eq!(
            exits[0].total, 3,
            "the last one, without an entry, is counted"
        );
        assert_eq!(
            exits[0].time_ns,
            Some(HandlingTime {
                min: 1000.0,
                mean: 1500.0,
                max: 2000.0
            })
        );
        assert_eq!(exits[1].reason, "IO_INSTRUCTION");
        assert_eq!(exits[1].time_ns.map(|t| t.mean), Some(6000.0));
    }

    #[test]
    fn window_exits_are_counted_by_rip_for_the_vcpu_threads_only() {
        let text = "\
           vcpu0-4242    [001] d..1.  1000: kvm_exit: vcpu 0 reason INTERRUPT_WINDOW rip 0x100b87 info1 0x0 info2 0x0
           vcpu0-4242    [001] d..1.  1001: kvm_entry: vcpu 0, rip 0x100b87
           vcpu0-4242    [001] d..1.  1002: kvm_exit: vcpu 0 reason INTERRUPT_WINDOW rip 0x100b87 info1 0x0 info2 0x0
           vcpu0-4242    [001] d..1.  1003: kvm_exit: vcpu 0 reason HLT rip 0x100b87 info1 0x0 info2 0x0
           vcpu1-4243    [000] d..1.  1004: kvm_exit: vcpu 1 reason INTERRUPT_WINDOW rip 0x1 info1 0x0 info2 0x0
  qemu-sys-tem-77  [002] ....  5.000001: kvm_exit: reason vintr rip 0x1004c3 info 0 0
";
        let vmx = window_exit_rips(text, &HashSet::from([4242]));
        assert_eq!(
            vmx,
            BTreeMap::from([(("kvm:INTERRUPT_WINDOW", 0x100b87), 2)]),
            "HLT and vCPU 1 left out"
        );
        let svm = window_exit_rips(text, &HashSet::from([77]));
        assert_eq!(svm, BTreeMap::from([(("kvm:vintr", 0x1004c3), 1)]));
    }

    #[test]
    fn the_default_clock_and_older_formats_parse_too() {
        let svm =
            "  qemu-sys-tem-77  [002] ....  5.000001: kvm_exit: reason npf rip 0x1 info 0 0\n\
                   qemu-sys-tem-77  [002] ....  5.000004: kvm_entry: vcpu 0\n\
                   garbage line\n";
        let exits = pair_exits(svm, &HashSet::from([77]), None);
        assert_eq!(exits.len(), 1);
        assert_eq!((exits[0].reason.as_str(), exits[0].total), ("npf", 1));
        let mean = exits[0].time_ns.expect("paired").mean;
        assert!((mean - 3000.0).abs() < 1.0, "{mean}");
        assert!(pair_exits(svm, &HashSet::from([78]), None).is_empty());
    }

    #[test]
    fn vcpu_threads_are_found_by_name() {
        let t = std::thread::Builder::new()
            .name("vcpu7".into())
            .spawn(|| std::thread::sleep(std::time::Duration::from_millis(300)))
            .expect("thread");
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!vcpu_tids().is_empty());
        t.join().expect("join");
    }
}
