//! A diagnostic: with `IRQBENCH_DUMP_ROUNDS=DIR`, every measured group writes its blocks to
//! `DIR/<group>.csv` (one line per vCPU block: round, variant, vCPU, TSC cycles, ops, flagged by
//! the thread-clock rules, off-CPU and wall ns) and what took the CPU while its rounds ran to
//! `DIR/<group>.sched` (per thread of this process: schedstat run and wait ns; per CPU: steal
//! and busy jiffies from /proc/stat). The estimator and disturbance evaluations read these; no
//! figure depends on them, and a failed write is a warning on stderr, never an error.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::collect::Obs;

/// The variable that names the directory.
pub const DUMP_ENV: &str = "IRQBENCH_DUMP_ROUNDS";

/// What the scheduler had said about this process's threads and the CPUs at one moment.
#[derive(Clone, Debug, Default)]
pub struct SchedSnapshot {
    /// (tid, run ns, wait ns, timeslices) per thread of this process.
    pub threads: Vec<(u32, u64, u64, u64)>,
    /// The `cpu` lines of /proc/stat, as read.
    pub cpus: Vec<String>,
}

/// The directory to dump into, when asked.
pub fn dir() -> Option<PathBuf> {
    std::env::var_os(DUMP_ENV)
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
}

/// This process's threads and the CPUs now (empty parts where /proc cannot be read).
pub fn snapshot() -> SchedSnapshot {
    let mut threads = Vec::new();
    if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
        for t in tasks.flatten() {
            let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let text = std::fs::read_to_string(t.path().join("schedstat")).unwrap_or_default();
            let v: Vec<u64> = text
                .split_whitespace()
                .filter_map(|f| f.parse().ok())
                .collect();
            if let [run, wait, slices] = v[..] {
                threads.push((tid, run, wait, slices));
            }
        }
    }
    let cpus = std::fs::read_to_string("/proc/stat")
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("cpu"))
        .map(str::to_string)
        .collect();
    SchedSnapshot { threads, cpus }
}

/// Writes the group's blocks and the scheduler's view before and after its rounds.
pub fn write(dir: &Path, group: &str, obs: &[Obs], before: &SchedSnapshot, after: &SchedSnapshot) {
    let safe: String = group
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let mut csv = String::from("round,variant,vcpu,cycles,ops,host_flagged,off_cpu_ns,wall_ns\n");
    for o in obs {
        let _ = writeln!(
            csv,
            "{},{},{},{},{},{},{},{}",
            o.round,
            o.variant,
            o.vcpu,
            o.cycles,
            o.ops,
            u8::from(o.host_disturbed),
            o.off_cpu_ns,
            o.wall_ns
        );
    }
    let mut sched = String::new();
    for (label, s) in [("before", before), ("after", after)] {
        for (tid, run, wait, slices) in &s.threads {
            let _ = writeln!(sched, "{label} thread {tid} {run} {wait} {slices}");
        }
        for c in &s.cpus {
            let _ = writeln!(sched, "{label} {c}");
        }
    }
    for (ext, text) in [("csv", csv), ("sched", sched)] {
        let path = dir.join(format!("{safe}.{ext}"));
        if let Err(e) = std::fs::write(&path, text) {
            eprintln!(
                "irqbench: {DUMP_ENV}: could not write {}: {e}",
                crate::text::escape_path(&path)
            );
        }
    }
}
