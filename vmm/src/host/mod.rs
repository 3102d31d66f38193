//! What the host is: CPU, kernel, which KVM serves `/dev/kvm` and how it is tuned.
//!
//! Exit counts and their costs depend on all of these (a nested host, PVM instead of VMX/SVM,
//! PLE or APICv settings), so every report carries a [`HostManifest`] built here: the flavour
//! ([`flavour`]), module parameters and APIC virtualization ([`modules`]), the other host facts
//! ([`manifest`]), and the checks that the host behaves as its flavour should ([`validate`]).

use std::collections::BTreeMap;
use std::ffi::{CStr, CString};
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use kvm_bindings::{
    KVM_CAP_BINARY_STATS_FD, KVM_CAP_EXIT_HYPERCALL, KVM_CAP_GET_TSC_KHZ, KVM_CAP_HLT,
    KVM_CAP_IMMEDIATE_EXIT, KVM_CAP_IOEVENTFD, KVM_CAP_IRQCHIP, KVM_CAP_IRQFD,
    KVM_CAP_IRQ_INJECT_STATUS, KVM_CAP_MAX_VCPUS, KVM_CAP_NR_VCPUS, KVM_CAP_PIT2,
    KVM_CAP_SET_TSS_ADDR, KVM_CAP_SPLIT_IRQCHIP, KVM_CAP_SYNC_REGS, KVM_CAP_TSC_CONTROL,
    KVM_CAP_TSC_DEADLINE_TIMER, KVM_CAP_USER_MEMORY, KVM_CAP_VCPU_EVENTS, KVM_CAP_X2APIC_API,
    KVM_CAP_X86_DISABLE_EXITS,
};
use kvm_ioctls::Kvm;

use crate::machine::IrqchipMode;
use crate::results::HostManifest;
use crate::results::KvmFlavour;
pub mod params;

pub mod cpu;
pub mod flavour;
pub mod manifest;
pub mod modules;
pub mod trace;

pub use manifest::format_manifest;

/// This machine's name (`/proc/sys/kernel/hostname`, at most 64 bytes), for `history --host`
/// and `--redact hostname`.
pub fn hostname() -> Option<String> {
    Some(read_small(Path::new("/proc/sys/kernel/hostname"))).filter(|n| !n.is_empty())
}

const KVM_PATH: &str = "/dev/kvm";
const SYS_MODULE: &str = "/sys/module";
const PROC_CPUINFO: &str = "/proc/cpuinfo";
/// Names another KVM device node than /dev/kvm.
pub const KVM_DEVICE_VAR: &str = "IRQBENCH_KVM_DEVICE";
/// Set to 1 to make tests that need KVM fail instead of skip when it cannot be opened.
pub const REQUIRE_KVM_VAR: &str = "IRQBENCH_REQUIRE_KVM";
/// `/dev/kvm` is the misc device with the fixed minor KVM_MINOR (include/linux/miscdevice.h).
const KVM_DEVICE_NUMBER: (u32, u32) = (10, 232);

#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error(
        "{} does not exist: load kvm_intel/kvm_amd (or run on a KVM host)",
        crate::text::escape_path(path)
    )]
    KvmMissing {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "permission denied opening {}: add your user to the 'kvm' group or run as root",
        crate::text::escape_path(path)
    )]
    KvmPermission {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot open {}", crate::text::escape_path(path))]
    OpenKvm {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "{} (from {KVM_DEVICE_VAR}) is a {kind}, not the KVM character device (10:232): \
         irqbench opens only KVM, never another device",
        crate::text::escape_path(path)
    )]
    NotKvmDevice { path: PathBuf, kind: String },
    #[error("{KVM_DEVICE_VAR} is set but empty; unset it to use {KVM_PATH}")]
    EmptyDeviceVar,
    #[error(
        "cannot open the KVM device {KVM_DEVICE_VAR}={}",
        crate::text::escape_path(path)
    )]
    DeviceVar {
        path: PathBuf,
        #[source]
        source: Box<HostError>,
    },
    #[error("cannot create a probe VM")]
    CreateVm(#[source] kvm_ioctls::Error),
    #[error("cannot create a probe vCPU")]
    CreateVcpu(#[source] kvm_ioctls::Error),
}

/// The value of the first `key : value` line of /proc/cpuinfo-formatted `text` named `key`.
pub(crate) fn cpuinfo_field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines().find_map(|line| {
        let (k, v) = line.split_once(':')?;
        (k.trim() == key).then(|| v.trim())
    })
}

fn cpuinfo_is_nested(text: &str) -> bool {
    cpuinfo_field(text, "flags")
        .is_some_and(|flags| flags.split_whitespace().any(|f| f == "hypervisor"))
}

/// The KVM device node [`open_kvm`] opens: `IRQBENCH_KVM_DEVICE`, or `/dev/kvm`.
pub fn kvm_device_path() -> PathBuf {
    match std::env::var_os(KVM_DEVICE_VAR) {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => PathBuf::from(KVM_PATH),
    }
}

/// Opens `/dev/kvm`, or the device named by `IRQBENCH_KVM_DEVICE` (for hosts that expose KVM
/// elsewhere, and for testing the error a missing device gives).
pub fn open_kvm() -> Result<Kvm, HostError> {
    match std::env::var_os(KVM_DEVICE_VAR) {
        Some(p) if p.is_empty() => Err(HostError::EmptyDeviceVar),
        Some(p) => {
            let path = PathBuf::from(p);
            open_checked_kvm_device(&path).map_err(|e| HostError::DeviceVar {
                path,
                source: Box::new(e),
            })
        }
        None => open_kvm_at(Path::new(KVM_PATH), Path::new(KVM_PATH)),
    }
}

/// A path from the environment is opened read-write only if it is KVM's device node: opening
/// some other device can have effects of its own (a watchdog starts counting down, a tape
/// rewinds), and a FIFO or file is no KVM anyway. A missing path is left to the open, whose
/// error explains it.
fn check_kvm_device(path: &Path) -> Result<(), HostError> {
    let Ok(meta) = fs::metadata(path) else {
        return Ok(());
    };
    check_kvm_metadata(path, &meta)
}

/// [`check_kvm_device`] on metadata already read.
fn check_kvm_metadata(path: &Path, meta: &fs::Metadata) -> Result<(), HostError> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let rdev = meta.rdev();
    let number = (libc::major(rdev), libc::minor(rdev));
    if meta.file_type().is_char_device() && number == KVM_DEVICE_NUMBER {
        return Ok(());
    }
    let kind = if meta.file_type().is_char_device() {
        format!("character device {}:{}", number.0, number.1)
    } else {
        crate::files::read::file_kind(meta).to_owned()
    };
    Err(HostError::NotKvmDevice {
        path: path.to_owned(),
        kind,
    })
}

/// Opens the node at `path` only if it is KVM's device, with no window between the check and
/// the open: the node is looked at through an `O_PATH` handle (which reaches no driver) and
/// then opened through that very handle (`/proc/self/fd`), so a path swapped for another
/// device in between is not opened. A missing path goes to the plain open, whose error says so.
fn open_checked_kvm_device(path: &Path) -> Result<Kvm, HostError> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let Ok(handle) = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH)
        .open(path)
    else {
        return open_kvm_at(path, path);
    };
    check_kvm_metadata(
        path,
        &handle.metadata().map_err(|source| HostError::OpenKvm {
            path: path.to_owned(),
            source,
        })?,
    )?;
    let via_proc = PathBuf::from(format!("/proc/self/fd/{}", handle.as_raw_fd()));
    if via_proc.exists() {
        open_kvm_at(&via_proc, path)
    } else {
        // No /proc: the path itself, checked once more right before.
        check_kvm_device(path)?;
        open_kvm_at(path, path)
    }
}

/// Opens KVM at `open`, naming `path` in errors (the two differ for a `/proc/self/fd` path).
fn open_kvm_at(open: &Path, path: &Path) -> Result<Kvm, HostError> {
    let cpath = CString::new(open.as_os_str().as_bytes()).map_err(|e| HostError::OpenKvm {
        path: path.to_owned(),
        source: io::Error::new(io::ErrorKind::InvalidInput, e),
    })?;
    Kvm::new_with_path(&cpath).map_err(|e| {
        let source = io::Error::from_raw_os_error(e.errno());
        let path = path.to_owned();
        match e.errno() {
            libc::ENOENT | libc::ENODEV | libc::ENXIO => HostError::KvmMissing { path, source },
            libc::EACCES | libc::EPERM => HostError::KvmPermission { path, source },
            _ => HostError::OpenKvm { path, source },
        }
    })
}

/// Names a `KVM_CAP_*` constant by its own identifier.
macro_rules! caps {
    ($($cap:ident),* $(,)?) => { [$((stringify!($cap), $cap)),*] };
}

/// Capabilities that decide which irqchip modes, exits and timing sources a run can use.
const CAPABILITIES: [(&str, u32); 21] = caps![
    KVM_CAP_IRQCHIP,
    KVM_CAP_SPLIT_IRQCHIP,
    KVM_CAP_IRQ_INJECT_STATUS,
    KVM_CAP_IRQFD,
    KVM_CAP_IOEVENTFD,
    KVM_CAP_PIT2,
    KVM_CAP_X2APIC_API,
    KVM_CAP_TSC_DEADLINE_TIMER,
    KVM_CAP_HLT,
    KVM_CAP_X86_DISABLE_EXITS,
    KVM_CAP_EXIT_HYPERCALL,
    KVM_CAP_IMMEDIATE_EXIT,
    KVM_CAP_SYNC_REGS,
    KVM_CAP_VCPU_EVENTS,
    KVM_CAP_GET_TSC_KHZ,
    KVM_CAP_TSC_CONTROL,
    KVM_CAP_BINARY_STATS_FD,
    KVM_CAP_USER_MEMORY,
    KVM_CAP_SET_TSS_ADDR,
    KVM_CAP_NR_VCPUS,
    KVM_CAP_MAX_VCPUS,
];

fn capabilities(kvm: &Kvm) -> BTreeMap<String, i64> {
    CAPABILITIES
        .iter()
        .map(|&(name, cap)| {
            let value = kvm.check_extension_raw(libc::c_ulong::from(cap));
            (name.to_owned(), i64::from(value))
        })
        .collect()
}

fn kernel_release() -> String {
    // SAFETY: utsname is plain C data, for which all-zero bytes are a valid value.
    let mut uts: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `uts` is a valid, writable utsname that the call fills in.
    if unsafe { libc::uname(&mut uts) } != 0 {
        return String::new();
    }
    // SAFETY: uname NUL-terminates `release`, which lives as long as `uts`.
    let release = unsafe { CStr::from_ptr(uts.release.as_ptr()) };
    release.to_string_lossy().into_owned()
}

/// The guest TSC frequency KVM reports, from a throwaway VM.
fn probe_tsc_khz(kvm: &Kvm) -> Result<Option<u64>, HostError> {
    let vm = kvm.create_vm().map_err(HostError::CreateVm)?;
    let vcpu = vm.create_vcpu(0).map_err(HostError::CreateVcpu)?;
    Ok(vcpu
        .get_tsc_khz()
        .ok()
        .filter(|&khz| khz > 0)
        .map(u64::from))
}

fn cpuinfo_mhz_as_khz(cpuinfo: &str) -> Option<u64> {
    let mhz: f64 = cpuinfo_field(cpuinfo, "cpu MHz")?.parse().ok()?;
    (mhz > 0.0).then(|| (mhz * 1000.0).round() as u64)
}

/// The irqchip modes a run can use here: userspace injection always works; the in-kernel
/// LAPIC (and so `lapic-timer`) needs KVM_CAP_IRQCHIP.
fn irqchip_modes(capabilities: &BTreeMap<String, i64>) -> Vec<String> {
    let mut modes = Vec::new();
    if capabilities.get("KVM_CAP_IRQCHIP").is_some_and(|&v| v > 0) {
        modes.push(IrqchipMode::InKernel.name().to_owned());
    }
    modes.push(IrqchipMode::Userspace.name().to_owned());
    modes
}

pub fn manifest(kvm: &Kvm) -> Result<HostManifest, HostError> {
    let cpuinfo = fs::read_to_string(PROC_CPUINFO).unwrap_or_default();
    let flavour = flavour::detect(kvm, &kvm_device_path(), Path::new("/"));
    let nested = cpuinfo_is_nested(&cpuinfo);
    let capabilities = capabilities(kvm);
    let mut warnings = Vec::new();

    let tsc_khz = match probe_tsc_khz(kvm)? {
        Some(khz) => khz,
        None => {
            warnings.push(
                "KVM_GET_TSC_KHZ unsupported: tsc_khz is /proc/cpuinfo \"cpu MHz\", which may \
                 differ from the guest TSC rate"
                    .to_owned(),
            );
            cpuinfo_mhz_as_khz(&cpuinfo).unwrap_or(0)
        }
    };
    if nested {
        warnings.push(
            "the host runs under a hypervisor: every exit also pays for the outer one".to_owned(),
        );
    }
    if flavour.declared == KvmFlavour::Pvm {
        warnings.push(
            "/dev/kvm is served by kvm_pvm: exits are PVM's, not VMX/SVM's, and per-reason \
             counters may differ"
                .to_owned(),
        );
    }
    if capabilities.get("KVM_CAP_BINARY_STATS_FD") == Some(&0) {
        warnings.push("no KVM_CAP_BINARY_STATS_FD: per-exit-reason stats unavailable".to_owned());
    }

    let irqchip_modes = irqchip_modes(&capabilities);
    let (module_params, module_params_unavailable) =
        modules::module_params_in(Path::new(SYS_MODULE));
    let apicv = [IrqchipMode::InKernel, IrqchipMode::Userspace]
        .into_iter()
        .filter(|m| irqchip_modes.iter().any(|n| n == m.name()))
        .map(|m| modules::apicv_in_effect(flavour.declared, m, &module_params))
        .collect();
    let mut m = HostManifest {
        cpu_model: cpuinfo_field(&cpuinfo, "model name")
            .unwrap_or("unknown")
            .to_owned(),
        host_cpus: std::thread::available_parallelism()
            .map_or(1, |n| u32::try_from(n.get()).unwrap_or(u32::MAX)),
        kernel_release: kernel_release(),
        kvm_flavour: flavour.declared,
        flavour,
        nested,
        module_params,
        module_params_unavailable,
        apicv,
        tsc_khz,
        kvm_api_version: kvm.get_api_version(),
        capabilities,
        max_vcpus: u32::try_from(kvm.get_max_vcpus()).unwrap_or(u32::MAX),
        recommended_vcpus: u32::try_from(kvm.get_nr_vcpus()).unwrap_or(u32::MAX),
        irqchip_modes,
        vcpu_pinning: false,
        warnings,
        ..Default::default()
    };
    manifest::add_host_facts(&mut m, Path::new("/"));
    m.emulated_cpu = emulated_cpu_here();
    if let Some(e) = &m.emulated_cpu {
        m.warnings.push(format!(
            "the CPU is emulated ({e}): cycle figures and timing checks are the emulator's; \
             exit counts and reasons are KVM's own"
        ));
    }
    Ok(m)
}

/// Whether this process's CPU is emulated, and by what (see [`cpu::emulated_cpu`]): from
/// this machine's hypervisor signature and DMI vendor and product.
pub fn emulated_cpu_here() -> Option<String> {
    let dmi = |f: &str| read_small(&Path::new("/sys/class/dmi/id").join(f));
    cpu::emulated_cpu(
        cpu::hypervisor_signature().as_deref(),
        &dmi("sys_vendor"),
        &dmi("product_name"),
        &dmi("bios_vendor"),
    )
}

/// Files larger than this are not host facts (and a fake tree may hold anything).
const MAX_FACT_BYTES: u64 = 64 * 1024;

/// A process resource's soft limit (`getrlimit`), `None` when unlimited or unreadable.
pub(crate) fn soft_limit(resource: libc::__rlimit_resource_t) -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the struct we own.
    let read = unsafe { libc::getrlimit(resource, &mut limit) } == 0;
    (read && limit.rlim_cur != libc::RLIM_INFINITY).then_some(limit.rlim_cur)
}

/// A procfs or sysfs file, trimmed, read up to [`MAX_FACT_BYTES`]; the error names the file.
pub(crate) fn read_fact(path: &Path) -> Result<String, String> {
    use std::io::Read as _;
    let cannot = |e: io::Error| format!("cannot read {}: {e}", path.display());
    let mut text = String::new();
    fs::File::open(path)
        .map_err(cannot)?
        .take(MAX_FACT_BYTES)
        .read_to_string(&mut text)
        .map_err(cannot)?;
    Ok(text.trim().to_owned())
}

/// [`read_fact`], "" when unreadable.
fn read_small(path: &Path) -> String {
    read_fact(path).unwrap_or_default()
}

/// For tests: the real /dev/kvm, or `None` after printing why the test is skipped. With
/// `IRQBENCH_REQUIRE_KVM=1` (CI sets it) a missing KVM panics instead, so a runner without KVM
/// fails loudly rather than passing every KVM test by skipping it.
pub fn test_kvm() -> Option<Kvm> {
    match kvm_or_skip(open_kvm(), kvm_required()) {
        Ok(kvm) => Some(kvm),
        Err(why) => {
            eprintln!("skipped: needs /dev/kvm ({why})");
            None
        }
    }
}

/// The KVM to test with, or why the test is skipped; panics when KVM is required.
fn kvm_or_skip(opened: Result<Kvm, HostError>, required: bool) -> Result<Kvm, String> {
    opened.map_err(|e| {
        let why = crate::error_chain(&e, ": ");
        if required {
            panic!("{REQUIRE_KVM_VAR}=1 but KVM cannot be opened: {why}");
        }
        why
    })
}

fn kvm_required() -> bool {
    std::env::var_os(REQUIRE_KVM_VAR).is_some_and(|v| v == "1")
}

#[cfg(test)]
mod tests {
    use vmm_sys_util::tempdir::TempDir;

    use super::*;
    use crate::results::Readable;

    #[test]
    fn the_declared_flavour_of_this_host_names_its_evidence() {
        let Some(kvm) = test_kvm() else { return };
        let record = flavour::detect(&kvm, &kvm_device_path(), Path::new("/"));
        // A host that serves /dev/kvm has a vendor module, and the record says how it knows.
        assert_ne!(record.declared, KvmFlavour::Unknown, "{record:?}");
        assert!(!record.declared_by.is_empty());
        assert!(
            record
                .modules
                .iter()
                .any(|m| m.starts_with(record.declared.module().unwrap())),
            "{record:?}"
        );
        assert!(
            matches!(&record.device, Readable::Value(d) if d.contains("10:232")),
            "{:?}",
            record.device
        );
    }

    #[test]
    fn cpuinfo_parsing() {
        let text = "processor\t: 0\nmodel name\t: Some CPU @ 2.0GHz\ncpu MHz\t\t: 2596.122\n\
                    flags\t\t: fpu vme hypervisor lahf_lm\n";
        assert_eq!(cpuinfo_field(text, "model name"), Some("Some CPU @ 2.0GHz"));
        assert_eq!(cpuinfo_mhz_as_khz(text), Some(2_596_122));
        assert!(cpuinfo_is_nested(text));
        assert!(!cpuinfo_is_nested("flags\t: fpu hypervisorish\n"));
    }

    #[test]
    fn missing_device_is_explained() {
        let err = open_kvm_at(Path::new("/nonexistent/kvm"), Path::new("/nonexistent/kvm"))
            .err()
            .unwrap();
        assert!(matches!(err, HostError::KvmMissing { .. }));
        assert_eq!(
            err.to_string(),
            "/nonexistent/kvm does not exist: load kvm_intel/kvm_amd (or run on a KVM host)"
        );
    }

    #[test]
    fn only_the_kvm_device_is_opened_from_the_environment() {
        let dir = TempDir::new().unwrap();
        let file = dir.as_path().join("kvm");
        fs::write(&file, "").unwrap();
        for (path, kind) in [
            (Path::new("/dev/null"), "character device 1:3"),
            (file.as_path(), "regular file"),
            (dir.as_path(), "directory"),
        ] {
            let err = check_kvm_device(path).expect_err("not KVM").to_string();
            assert!(err.contains(kind) && err.contains(KVM_DEVICE_VAR), "{err}");
        }
        assert!(check_kvm_device(Path::new("/nonexistent/kvm")).is_ok());
        if Path::new(KVM_PATH).exists() {
            check_kvm_device(Path::new(KVM_PATH)).expect("/dev/kvm is KVM");
        }
    }

    #[test]
    #[should_panic(expected = "IRQBENCH_REQUIRE_KVM=1 but KVM cannot be opened")]
    fn a_required_kvm_that_cannot_be_opened_fails_the_test() {
        let _ = kvm_or_skip(Err(HostError::EmptyDeviceVar), true);
    }

    #[test]
    fn an_optional_kvm_that_cannot_be_opened_skips() {
        // The reason is returned, not printed: only a real skip prints a `skipped:` line, which
        // .ci/run counts as a skipped test.
        let why = kvm_or_skip(Err(HostError::EmptyDeviceVar), false).unwrap_err();
        assert!(why.contains("IRQBENCH_KVM_DEVICE"), "{why}");
    }

    #[test]
    fn irqchip_modes_follow_the_capability() {
        let caps = |v: i64| BTreeMap::from([("KVM_CAP_IRQCHIP".to_owned(), v)]);
        assert_eq!(irqchip_modes(&caps(1)), ["in-kernel", "userspace"]);
        assert_eq!(irqchip_modes(&caps(0)), ["userspace"]);
    }

    #[test]
    fn manifest_of_this_host() {
        let Some(kvm) = test_kvm() else { return };
        let m = manifest(&kvm).unwrap();
        println!("{}", format_manifest(&m));
        assert!(!m.cpu_model.is_empty());
        assert!(!m.kernel_release.is_empty());
        assert!(m.tsc_khz > 0);
        assert!(m.recommended_vcpus >= 1);
        assert!(m.max_vcpus >= m.recommended_vcpus);
        assert_eq!(m.kvm_flavour, m.flavour.declared);
        assert!(m.kernel_cmdline.value().is_some(), "{:?}", m.kernel_cmdline);
        assert!(m.load_average.value().is_some(), "{:?}", m.load_average);
        assert!(m.module_params.contains_key("kvm.min_timer_period_us"));
        assert!(
            m.apicv
                .iter()
                .any(|a| a.irqchip == "userspace" && a.in_effect == Readable::Value(false)),
            "{:?}",
            m.apicv
        );
        assert_eq!(m.kvm_api_version, 12);
        assert!(m.capabilities.contains_key("KVM_CAP_BINARY_STATS_FD"));
        let text = format_manifest(&m);
        assert!(text.contains("capabilities:\n  KVM_CAP_"));
        assert!(text.lines().any(|l| l.starts_with("kvm flavour:")));
        assert!(
            text.lines()
                .any(|l| l.starts_with("irqchip modes:") && l.contains("userspace")),
            "{text}"
        );
    }
}
