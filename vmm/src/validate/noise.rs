//! What else runs on the host: /proc/stat samples (steal time, how busy SMT siblings are), the
//! sibling topology, and the host's own CPUID for the invariant TSC bit. Files are read under a
//! root path so tests can hand in a fake tree.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::time::Instant;

use super::judge::{words, Judged, LOAD_PER_CPU_MAX, SIBLING_BUSY_MAX, STEAL_MAX};
use super::observations::{SmtObs, StealObs};
use crate::host::manifest::parse_cpu_list;
use crate::results::{CpuFreq, Readable, Smt, Verdict};

/// Ticks of one CPU (or all) from a /proc/stat `cpu` line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTimes {
    /// user + nice + system + idle + iowait + irq + softirq + steal (guest time is inside
    /// user already).
    pub total: u64,
    /// idle + iowait.
    pub idle: u64,
    pub steal: u64,
}

impl CpuTimes {
    fn since(&self, earlier: &CpuTimes) -> CpuTimes {
        CpuTimes {
            total: self.total.saturating_sub(earlier.total),
            idle: self.idle.saturating_sub(earlier.idle),
            steal: self.steal.saturating_sub(earlier.steal),
        }
    }

    /// The fraction of the ticks that were neither idle nor stolen.
    fn busy(&self) -> f64 {
        let used = self.total.saturating_sub(self.idle + self.steal);
        used as f64 / self.total.max(1) as f64
    }
}

/// One reading of /proc/stat.
#[derive(Clone, Debug)]
pub struct StatSample {
    pub at: Instant,
    pub all: CpuTimes,
    pub per_cpu: BTreeMap<u32, CpuTimes>,
}

fn parse_cpu_line(fields: &[&str]) -> Option<CpuTimes> {
    let v: Vec<u64> = fields
        .iter()
        .take(8)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    if v.len() < 4 {
        return None;
    }
    let at = |i: usize| v.get(i).copied().unwrap_or(0);
    Some(CpuTimes {
        total: v.iter().sum(),
        idle: at(3) + at(4),
        steal: at(7),
    })
}

/// The `cpu` and `cpuN` lines of /proc/stat.
pub fn parse_proc_stat(text: &str) -> Result<(CpuTimes, BTreeMap<u32, CpuTimes>), String> {
    let mut all = None;
    let mut per_cpu = BTreeMap::new();
    for line in text.lines() {
        let mut fields = line.split_whitespace();
        let Some(name) = fields.next() else { continue };
        let Some(rest) = name.strip_prefix("cpu") else {
            continue;
        };
        let rest_fields: Vec<&str> = fields.collect();
        let times = parse_cpu_line(&rest_fields)
            .ok_or_else(|| format!("malformed /proc/stat line `{line}`"))?;
        if rest.is_empty() {
            all = Some(times);
        } else if let Ok(cpu) = rest.parse::<u32>() {
            per_cpu.insert(cpu, times);
        }
    }
    let all = all.ok_or("no `cpu` line in /proc/stat")?;
    Ok((all, per_cpu))
}

pub fn sample_in(root: &Path) -> Result<StatSample, String> {
    let path = root.join("proc/stat");
    let text =
        fs::read_to_string(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let (all, per_cpu) = parse_proc_stat(&text)?;
    Ok(StatSample {
        at: Instant::now(),
        all,
        per_cpu,
    })
}

/// Steal time between two samples.
pub fn steal_between(start: &StatSample, end: &StatSample) -> StealObs {
    let d = end.all.since(&start.all);
    StealObs {
        steal_ticks: d.steal,
        total_ticks: d.total,
        seconds: end.at.saturating_duration_since(start.at).as_secs_f64(),
    }
}

/// The other hyperthreads of `cpu` (its `thread_siblings_list` without itself).
pub fn siblings_in(root: &Path, cpu: u32) -> Vec<u32> {
    let path = root.join(format!(
        "sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list"
    ));
    fs::read_to_string(path)
        .ok()
        .and_then(|t| parse_cpu_list(&t).ok())
        .unwrap_or_default()
        .into_iter()
        .filter(|&c| c != cpu)
        .collect()
}

/// The busiest sibling of any of `cpus` between two samples, with SMT's state.
pub fn smt_obs(
    root: &Path,
    smt: Readable<Smt>,
    cpus: &[u32],
    start: &StatSample,
    end: &StatSample,
) -> SmtObs {
    let busiest_sibling = cpus
        .iter()
        .flat_map(|&c| siblings_in(root, c))
        .filter_map(|s| {
            let d = end.per_cpu.get(&s)?.since(start.per_cpu.get(&s)?);
            Some((s, d.busy()))
        })
        .max_by(|a, b| a.1.total_cmp(&b.1));
    SmtObs {
        smt,
        busiest_sibling,
    }
}

/// The CPUs this process may run on (its affinity mask), or 0..n when it cannot be read.
pub fn allowed_cpus() -> Vec<u32> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity writes at most its size.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: pid 0 is the calling thread; the size is that of `set`, which we own.
    let ok = unsafe { libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut set) } == 0;
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    if !ok {
        return (0..n as u32).collect();
    }
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: CPU_ISSET reads bit `c` (< CPU_SETSIZE) of the set we own.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .map(|c| c as u32)
        .collect()
}

/// CPUID 80000007h EDX[8], the invariant TSC, of the host CPU (`None` where the leaf is not
/// offered).
pub fn host_tsc_invariant() -> Option<bool> {
    use crate::host::cpu::cpuid;
    if cpuid(0x8000_0000, 0).eax < 0x8000_0007 {
        return None;
    }
    Some(cpuid(0x8000_0007, 0).edx & (1 << 8) != 0)
}

// ---------------------------------------------------------------------------------------------
// The noise checks' judges (no flavour expectation: noise is noise on every host)

pub fn load(load1: Readable<f64>, cpus: u32) -> Judged {
    let expected = format!("1-minute load ≤ {LOAD_PER_CPU_MAX} per CPU ({cpus} CPUs)");
    let Some(&l) = load1.value() else {
        return words(expected, load1.text(|_| String::new())).warn("cannot read the load");
    };
    let measured = format!("{l:.2} ({:.2} per CPU)", l / f64::from(cpus.max(1)));
    words(expected, measured).pass_or(
        l / f64::from(cpus.max(1)) <= LOAD_PER_CPU_MAX,
        Verdict::Warn,
        "other work competes for the CPUs: preempted blocks are left out (the `disturbed` \
         column), but rounds get fewer and drift larger",
    )
}

pub fn steal(m: Result<StealObs, String>) -> Judged {
    let expected = format!("steal ≤ {:.0}% of CPU time over ≥ 1 s", STEAL_MAX * 100.0);
    let m = match m {
        Ok(m) => m,
        Err(why) => {
            return words(expected, format!("unavailable ({why})"))
                .warn("cannot tell whether an outer hypervisor takes CPU time from this host")
        }
    };
    let f = m.steal_ticks as f64 / m.total_ticks.max(1) as f64;
    let measured = format!("{:.2}% over {:.1} s", f * 100.0, m.seconds);
    words(expected, measured).pass_or(
        f <= STEAL_MAX,
        Verdict::Warn,
        "the outer hypervisor takes this host's CPUs away: the TSC keeps counting meanwhile, \
         which the block-time outlier rule catches only when it is long",
    )
}

pub fn cpufreq(m: &Readable<CpuFreq>) -> Judged {
    let expected = "governor performance, boost off (a fixed core clock)".to_owned();
    let c = match m {
        Readable::Value(c) => c,
        Readable::Unavailable(why) => {
            return words(expected, format!("unavailable ({why})")).warn(
                "the core clock is not visible from here: TSC cycles stay invariant, but the \
                 work a cycle does may change between runs",
            )
        }
    };
    let governors: Vec<&str> = c.governors.keys().map(String::as_str).collect();
    let boost = c.boost.value().copied();
    let measured = format!(
        "governor {}, boost {}",
        governors.join("+"),
        boost.map_or("unknown", |b| if b { "on" } else { "off" })
    );
    words(expected, measured).pass_or(
        governors == ["performance"] && boost == Some(false),
        Verdict::Warn,
        "the core clock follows load and temperature: costs in TSC cycles move with it",
    )
}

pub fn smt(m: &SmtObs) -> Judged {
    let expected = format!(
        "no SMT sibling of a vCPU's CPU busier than {:.0}%",
        SIBLING_BUSY_MAX * 100.0
    );
    let smt = match &m.smt {
        Readable::Value(s) => s,
        Readable::Unavailable(why) => {
            return words(expected, format!("unavailable ({why})"))
                .warn("cannot tell whether a vCPU shares its core with other work")
        }
    };
    if !smt.active {
        return words(
            expected,
            format!("SMT {} (not active): no siblings", smt.control),
        )
        .pass();
    }
    match m.busiest_sibling {
        Some((cpu, busy)) if busy > SIBLING_BUSY_MAX => {
            words(expected, format!("CPU {cpu} {:.0}% busy", busy * 100.0))
                .warn("a busy sibling hyperthread shares the core's execution units with a vCPU")
        }
        Some((cpu, busy)) => words(
            expected,
            format!("busiest sibling CPU {cpu} {:.0}%", busy * 100.0),
        )
        .pass(),
        None => words(expected, "SMT active, no sibling found").pass(),
    }
}

#[cfg(test)]
mod tests {
    use vmm_sys_util::tempdir::TempDir;

    use super::*;

    const STAT_A: &str = "cpu  100 0 50 800 10 0 5 0 0 0\n\
                          cpu0 50 0 25 400 5 0 3 0 0 0\n\
                          cpu1 50 0 25 400 5 0 2 0 0 0\n\
                          intr 1 2 3\nctxt 99\n";
    const STAT_B: &str = "cpu  200 0 60 900 10 0 5 40 0 0\n\
                          cpu0 140 0 30 410 5 0 3 20 0 0\n\
                          cpu1 60 0 30 490 5 0 2 20 0 0\n";

    #[test]
    fn proc_stat_parses_and_steal_is_a_share_of_all_ticks() {
        let (all, per_cpu) = parse_proc_stat(STAT_A).unwrap();
        assert_eq!(all.total, 965);
        assert_eq!(all.idle, 810);
        assert_eq!(per_cpu.len(), 2);
        let at = Instant::now();
        let a = StatSample { at, all, per_cpu };
        let (all, per_cpu) = parse_proc_stat(STAT_B).unwrap();
        let b = StatSample { at, all, per_cpu };
        let s = steal_between(&a, &b);
        assert_eq!((s.steal_ticks, s.total_ticks), (40, 250));
        assert!(parse_proc_stat("intr 1\n").is_err());
        assert!(parse_proc_stat("cpu x y\n").is_err());
    }

    #[test]
    fn the_busiest_sibling_comes_from_the_topology() {
        let dir = TempDir::new().unwrap();
        let r = dir.as_path();
        for (cpu, list) in [(0, "0-1"), (1, "0-1")] {
            let p = r.join(format!("sys/devices/system/cpu/cpu{cpu}/topology"));
            fs::create_dir_all(&p).unwrap();
            fs::write(p.join("thread_siblings_list"), list).unwrap();
        }
        let at = Instant::now();
        let sample = |t: &str| {
            let (all, per_cpu) = parse_proc_stat(t).unwrap();
            StatSample { at, all, per_cpu }
        };
        let (a, b) = (sample(STAT_A), sample(STAT_B));
        let smt = Readable::Value(Smt {
            control: "on".into(),
            active: true,
        });
        // The vCPU runs on CPU 1; its sibling CPU 0 worked 95 of its 125 ticks.
        let obs = smt_obs(r, smt, &[1], &a, &b);
        let (cpu, busy) = obs.busiest_sibling.unwrap();
        assert_eq!(cpu, 0);
        assert!((busy - 95.0 / 125.0).abs() < 1e-9, "{busy}");
        assert_eq!(siblings_in(r, 7), Vec::<u32>::new());
    }

    #[test]
    fn this_process_may_run_somewhere() {
        assert!(!allowed_cpus().is_empty());
    }
}
