//! The host facts that move the numbers besides KVM itself: kernel command line, CPU
//! vulnerability mitigations, frequency scaling, SMT, microcode, isolated CPUs and the load at
//! start. Each is read from files under a root path (tests pass a fake tree), and a field that
//! cannot be read says why ([`Readable`]) rather than being left out.

use crate::results::{CpuFreq, Pinning, Readable, Smt};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::path::Path;

use super::read_fact;
use crate::results::HostManifest;

pub fn kernel_cmdline_in(root: &Path) -> Readable<String> {
    read_fact(&root.join("proc/cmdline")).into()
}

/// Every file of /sys/devices/system/cpu/vulnerabilities, by name.
pub fn vulnerabilities_in(root: &Path) -> Readable<BTreeMap<String, String>> {
    let dir = root.join("sys/devices/system/cpu/vulnerabilities");
    let entries = match fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) => return Readable::Unavailable(format!("cannot list {}: {e}", dir.display())),
    };
    let mut out = BTreeMap::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let value = read_fact(&entry.path()).unwrap_or_else(|why| format!("? ({why})"));
        out.insert(name, value);
    }
    Readable::Value(out)
}

/// A kernel CPU list (`0-3,8,10-11`); at most 8192 CPUs.
pub fn parse_cpu_list(text: &str) -> Result<Vec<u32>, String> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.trim().is_empty()) {
        let bad = || format!("`{part}` in the CPU list `{}`", text.trim());
        let (lo, hi) = match part.trim().split_once('-') {
            Some((a, b)) => (a.parse::<u32>(), b.parse::<u32>()),
            None => (part.trim().parse::<u32>(), part.trim().parse::<u32>()),
        };
        let (lo, hi) = (lo.map_err(|_| bad())?, hi.map_err(|_| bad())?);
        if hi < lo || hi >= 8192 {
            return Err(bad());
        }
        cpus.extend(lo..=hi);
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

pub fn isolated_cpus_in(root: &Path) -> Readable<Vec<u32>> {
    read_fact(&root.join("sys/devices/system/cpu/isolated"))
        .and_then(|t| parse_cpu_list(&t))
        .into()
}

pub fn smt_in(root: &Path) -> Readable<Smt> {
    let dir = root.join("sys/devices/system/cpu/smt");
    let control = match read_fact(&dir.join("control")) {
        Ok(c) => c,
        Err(why) => return Readable::Unavailable(why),
    };
    let active = read_fact(&dir.join("active")).is_ok_and(|a| a == "1");
    Readable::Value(Smt { control, active })
}

/// Boost from the global `cpufreq/boost` (acpi-cpufreq, amd-pstate), intel_pstate's
/// `no_turbo` (inverted), or the first policy's own `boost`.
fn boost_in(cpu: &Path, first_policy: &Path) -> Readable<bool> {
    if let Ok(b) = read_fact(&cpu.join("cpufreq/boost")) {
        return Readable::Value(b == "1");
    }
    if let Ok(n) = read_fact(&cpu.join("intel_pstate/no_turbo")) {
        return Readable::Value(n == "0");
    }
    match read_fact(&first_policy.join("boost")) {
        Ok(b) => Readable::Value(b == "1"),
        Err(_) => Readable::Unavailable(
            "no cpufreq/boost, intel_pstate/no_turbo or policy boost file".into(),
        ),
    }
}

pub fn cpufreq_in(root: &Path) -> Readable<CpuFreq> {
    let cpu = root.join("sys/devices/system/cpu");
    let mut policies: Vec<_> = fs::read_dir(cpu.join("cpufreq"))
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with("policy"))
                })
                .collect()
        })
        .unwrap_or_default();
    policies.sort();
    let Some(first) = policies.first() else {
        return Readable::Unavailable(
            "no cpufreq policy under /sys/devices/system/cpu/cpufreq: no frequency-scaling \
             driver (usual in a VM, where the outer host sets the frequency)"
                .into(),
        );
    };
    let mut governors: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for p in &policies {
        let governor = read_fact(&p.join("scaling_governor")).unwrap_or_else(|_| "?".into());
        let cpus: Vec<u32> = read_fact(&p.join("affected_cpus"))
            .map(|t| {
                t.split_whitespace()
                    .filter_map(|c| c.parse::<u32>().ok())
                    .collect()
            })
            .unwrap_or_default();
        governors.entry(governor).or_default().extend(cpus);
    }
    Readable::Value(CpuFreq {
        driver: read_fact(&first.join("scaling_driver")).unwrap_or_else(|_| "?".into()),
        governors,
        boost: boost_in(&cpu, first),
    })
}

/// The microcode revision(s) /proc/cpuinfo reports, or cpu0's sysfs `microcode/version`.
pub fn microcode_in(root: &Path) -> Readable<String> {
    if let Ok(cpuinfo) = read_fact(&root.join("proc/cpuinfo")) {
        let mut revisions: Vec<&str> = cpuinfo
            .lines()
            .filter_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == "microcode").then(|| v.trim())
            })
            .collect();
        revisions.sort_unstable();
        revisions.dedup();
        if !revisions.is_empty() {
            return Readable::Value(revisions.join(", "));
        }
    }
    read_fact(&root.join("sys/devices/system/cpu/cpu0/microcode/version"))
        .map_err(|_| "no `microcode` line in /proc/cpuinfo and no cpu0/microcode/version".into())
        .into()
}

/// The 1, 5 and 15 minute load averages.
pub fn load_average_in(root: &Path) -> Readable<[f64; 3]> {
    let text = match read_fact(&root.join("proc/loadavg")) {
        Ok(t) => t,
        Err(why) => return Readable::Unavailable(why),
    };
    let v: Vec<f64> = text
        .split_whitespace()
        .take(3)
        .filter_map(|x| x.parse().ok())
        .collect();
    match v[..] {
        [a, b, c] => Readable::Value([a, b, c]),
        _ => Readable::Unavailable(format!("unexpected /proc/loadavg `{text}`")),
    }
}

/// Whether the vCPU threads were pinned, where, and whether those CPUs are isolated.
pub fn pinning_in(root: &Path, pinned: bool, cpus: Vec<u32>) -> Pinning {
    let isolated_cpus = isolated_cpus_in(root);
    let on_isolated = match (&isolated_cpus, pinned) {
        (Readable::Value(iso), true) => {
            Some(!cpus.is_empty() && cpus.iter().all(|c| iso.contains(c)))
        }
        _ => None,
    };
    Pinning {
        pinned,
        cpus: if pinned { cpus } else { Vec::new() },
        isolated_cpus,
        on_isolated,
    }
}

/// Fills the facts of this file into `m` from the files under `root` (`/` on a real host).
pub fn add_host_facts(m: &mut HostManifest, root: &Path) {
    m.kernel_cmdline = kernel_cmdline_in(root);
    m.vulnerabilities = vulnerabilities_in(root);
    m.cpufreq = cpufreq_in(root);
    m.smt = smt_in(root);
    m.microcode = microcode_in(root);
    m.load_average = load_average_in(root);
    m.pinning = pinning_in(root, m.vcpu_pinning, Vec::new());
}

/// Appends `key: value` lines with values aligned after the longest key.
fn push_aligned<'a>(
    out: &mut String,
    indent: &str,
    rows: impl IntoIterator<Item = (&'a str, String)>,
) {
    let rows: Vec<_> = rows.into_iter().collect();
    let width = rows.iter().map(|(k, _)| k.len() + 1).max().unwrap_or(0);
    // Keys and values are host facts (sysfs names, the command line, a device path): each
    // stays on its line.
    for (key, value) in rows {
        let (key, value) = (
            crate::text::escape_line(key),
            crate::text::escape_line(&value),
        );
        let _ = writeln!(out, "{indent}{:<width$} {value}", format!("{key}:"));
    }
}

fn list_text<T: ToString>(v: &[T]) -> String {
    if v.is_empty() {
        "-".to_owned()
    } else {
        v.iter().map(T::to_string).collect::<Vec<_>>().join(", ")
    }
}

fn cpufreq_text(c: &CpuFreq) -> String {
    let governors: Vec<String> = c
        .governors
        .iter()
        .map(|(g, cpus)| format!("{g} (CPUs {})", list_text(cpus)))
        .collect();
    format!(
        "{} {}, boost {}",
        c.driver,
        governors.join(", "),
        c.boost.text(|b| if *b { "on" } else { "off" }.into())
    )
}

fn pinning_text(p: &Pinning) -> String {
    let isolated = p.isolated_cpus.text(|c| list_text(c));
    if !p.pinned {
        return format!("no (isolated CPUs: {isolated})");
    }
    let on = match p.on_isolated {
        Some(true) => "isolated",
        Some(false) => "not isolated",
        None => "isolation unknown",
    };
    format!(
        "vCPUs on CPUs {} ({on}; isolated CPUs: {isolated})",
        list_text(&p.cpus)
    )
}

fn flavour_text(m: &HostManifest) -> [(&'static str, String); 4] {
    let f = &m.flavour;
    [
        (
            "kvm flavour",
            format!("{} ({})", m.kvm_flavour, f.declared_by),
        ),
        ("kvm device", f.device.text(Clone::clone)),
        ("vendor modules", list_text(&f.modules)),
        (
            "flavour behaviour",
            f.behaviour.text(|b| {
                format!(
                    "{} (insn_emulation {:+.2} per CPL0 cli) → {}",
                    if b.emulates_cpl0 {
                        "emulates CPL0 code"
                    } else {
                        "runs CPL0 code on the CPU"
                    },
                    b.insn_emulation_per_cli,
                    f.behavioural.unwrap_or_default()
                )
            }),
        ),
    ]
}

/// The fields of the top block of `irqbench host`, in order.
fn summary_rows(m: &HostManifest) -> Vec<(&'static str, String)> {
    let mut rows = vec![
        ("cpu model", m.cpu_model.clone()),
        ("host cpus", m.host_cpus.to_string()),
        ("kernel", m.kernel_release.clone()),
        ("kernel cmdline", m.kernel_cmdline.text(Clone::clone)),
    ];
    rows.extend(flavour_text(m));
    rows.extend([
        ("nested", m.nested.to_string()),
        ("tsc khz", m.tsc_khz.to_string()),
        ("kvm api version", m.kvm_api_version.to_string()),
        ("max vcpus", m.max_vcpus.to_string()),
        ("recommended vcpus", m.recommended_vcpus.to_string()),
        ("irqchip modes", list_text(&m.irqchip_modes)),
        ("vcpu pinning", pinning_text(&m.pinning)),
        ("cpufreq", m.cpufreq.text(cpufreq_text)),
        (
            "smt",
            m.smt
                .text(|s| format!("{} (active: {})", s.control, s.active)),
        ),
        ("microcode", m.microcode.text(Clone::clone)),
        (
            "load average",
            m.load_average
                .text(|l| format!("{:.2} {:.2} {:.2}", l[0], l[1], l[2])),
        ),
    ]);
    rows
}

/// The human-readable block `irqbench host` prints.
pub fn format_manifest(m: &HostManifest) -> String {
    let mut out = String::new();
    push_aligned(&mut out, "", summary_rows(m));
    out.push_str("apic virtualization:\n");
    push_aligned(
        &mut out,
        "  ",
        m.apicv.iter().map(|a| {
            let on = a.in_effect.text(|b| if *b { "on" } else { "off" }.into());
            (a.irqchip.as_str(), format!("{on}: {}", a.why))
        }),
    );
    out.push_str("capabilities:\n");
    push_aligned(
        &mut out,
        "  ",
        m.capabilities
            .iter()
            .map(|(k, v)| (k.as_str(), v.to_string())),
    );
    out.push_str("module params:\n");
    if m.module_params.is_empty() && m.module_params_unavailable.is_empty() {
        out.push_str("  -\n");
    }
    push_aligned(
        &mut out,
        "  ",
        m.module_params
            .iter()
            .map(|(k, v)| (k.as_str(), v.clone()))
            .chain(
                m.module_params_unavailable
                    .iter()
                    .map(|(k, why)| (k.as_str(), format!("unavailable ({why})"))),
            ),
    );
    out.push_str("cpu vulnerabilities:\n");
    match &m.vulnerabilities {
        Readable::Value(v) => push_aligned(
            &mut out,
            "  ",
            v.iter().map(|(k, s)| (k.as_str(), s.clone())),
        ),
        Readable::Unavailable(why) => {
            let _ = writeln!(out, "  unavailable ({why})");
        }
    }
    if !m.warnings.is_empty() {
        out.push_str("warnings:\n");
        for w in &m.warnings {
            let _ = writeln!(out, "  - {w}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use vmm_sys_util::tempdir::TempDir;

    use super::*;

    fn write(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }

    /// A tree shaped like a bare-metal host with cpufreq, SMT and isolated CPUs.
    fn bare_metal() -> TempDir {
        let dir = TempDir::new().unwrap();
        let r = dir.as_path();
        write(
            r,
            "proc/cmdline",
            "BOOT_IMAGE=/vmlinuz isolcpus=2-3 mitigations=auto\n",
        );
        write(r, "proc/loadavg", "0.50 0.25 0.10 1/300 4242\n");
        write(
            r,
            "proc/cpuinfo",
            "processor\t: 0\nmicrocode\t: 0xf0\n\nprocessor\t: 1\nmicrocode\t: 0xf0\n",
        );
        let cpu = "sys/devices/system/cpu";
        write(
            r,
            &format!("{cpu}/vulnerabilities/meltdown"),
            "Not affected\n",
        );
        write(
            r,
            &format!("{cpu}/vulnerabilities/spectre_v2"),
            "Mitigation: Enhanced IBRS\n",
        );
        write(r, &format!("{cpu}/smt/control"), "on\n");
        write(r, &format!("{cpu}/smt/active"), "1\n");
        write(r, &format!("{cpu}/isolated"), "2-3\n");
        for (p, gov, cpus) in [
            ("policy0", "performance", "0 1"),
            ("policy2", "powersave", "2 3"),
        ] {
            write(r, &format!("{cpu}/cpufreq/{p}/scaling_governor"), gov);
            write(r, &format!("{cpu}/cpufreq/{p}/affected_cpus"), cpus);
            write(
                r,
                &format!("{cpu}/cpufreq/{p}/scaling_driver"),
                "intel_pstate",
            );
        }
        write(r, &format!("{cpu}/intel_pstate/no_turbo"), "0\n");
        dir
    }

    #[test]
    fn every_fact_is_read_from_a_bare_metal_tree() {
        let dir = bare_metal();
        let r = dir.as_path();
        let mut m = HostManifest {
            vcpu_pinning: true,
            ..Default::default()
        };
        add_host_facts(&mut m, r);
        assert_eq!(
            m.kernel_cmdline.value().unwrap(),
            "BOOT_IMAGE=/vmlinuz isolcpus=2-3 mitigations=auto"
        );
        assert_eq!(m.load_average, Readable::Value([0.5, 0.25, 0.1]));
        assert_eq!(m.microcode, Readable::Value("0xf0".into()));
        let v = m.vulnerabilities.value().unwrap();
        assert_eq!(v["spectre_v2"], "Mitigation: Enhanced IBRS");
        let f = m.cpufreq.value().unwrap();
        assert_eq!(f.driver, "intel_pstate");
        assert_eq!(f.governors["powersave"], [2, 3]);
        assert_eq!(f.boost, Readable::Value(true), "no_turbo=0 means boost on");
        assert_eq!(
            m.smt,
            Readable::Value(Smt {
                control: "on".into(),
                active: true
            })
        );
        let p = pinning_in(r, true, vec![2, 3]);
        assert_eq!(p.on_isolated, Some(true));
        assert_eq!(pinning_in(r, true, vec![0, 1]).on_isolated, Some(false));
        assert_eq!(pinning_in(r, false, vec![0]).on_isolated, None);
        let text = format_manifest(&m);
        assert!(text.contains("powersave (CPUs 2, 3)"), "{text}");
        assert!(text.contains("spectre_v2:"), "{text}");
    }

    #[test]
    fn an_empty_tree_says_why_each_fact_is_missing() {
        let dir = TempDir::new().unwrap();
        let mut m = HostManifest::default();
        add_host_facts(&mut m, dir.as_path());
        for why in [
            m.kernel_cmdline.text(Clone::clone),
            m.microcode.text(Clone::clone),
            m.smt.text(|_| String::new()),
            m.load_average.text(|_| String::new()),
            m.vulnerabilities.text(|_| String::new()),
            m.pinning.isolated_cpus.text(|_| String::new()),
        ] {
            assert!(why.starts_with("unavailable (") && why.len() > 20, "{why}");
        }
        let Readable::Unavailable(why) = &m.cpufreq else {
            panic!("cpufreq read from nothing")
        };
        assert!(why.contains("no cpufreq policy"), "{why}");
    }

    #[test]
    fn readable_is_tagged_in_json_and_defaults_for_old_files() {
        let v: Readable<u32> = Readable::Value(3);
        assert_eq!(serde_json::to_string(&v).unwrap(), r#"{"value":3}"#);
        let u: Readable<u32> = Readable::Unavailable("no file".into());
        assert_eq!(
            serde_json::to_string(&u).unwrap(),
            r#"{"unavailable":"no file"}"#
        );
        assert_eq!(
            serde_json::from_str::<Readable<u32>>(r#"{"unavailable":"x"}"#).unwrap(),
            Readable::Unavailable("x".into())
        );
        assert!(matches!(
            Readable::<u32>::default(),
            Readable::Unavailable(_)
        ));
    }

    #[test]
    fn cpu_lists_parse_and_bad_ones_are_refused() {
        assert_eq!(parse_cpu_list("0-2,5,7-8\n").unwrap(), [0, 1, 2, 5, 7, 8]);
        assert_eq!(parse_cpu_list("").unwrap(), Vec::<u32>::new());
        for bad in ["3-1", "x", "0-99999", "1,-"] {
            assert!(parse_cpu_list(bad).is_err(), "{bad}");
        }
    }
}
