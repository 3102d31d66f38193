//! Which KVM serves the device irqbench opened: what the host declares, and what the guest's
//! behaviour confirms.
//!
//! The vendor module behind `/dev/kvm` cannot be read from the device node: it is the `misc`
//! device 10:232 whoever registered it (`/sys/class/misc/kvm` has no driver link), and
//! `/sys/module/<name>` exists for every built-in module that has parameters, whether or not its
//! init succeeded. So the *declared* flavour comes from the opened fd itself where it can
//! (PVM puts its vendor signature in CPUID leaf 0x40000002 of `KVM_GET_SUPPORTED_CPUID`), else
//! from the vendor modules present and the CPU vendor (mainline KVM registers one vendor module:
//! `kvm_x86_vendor_init` refuses a second with "already loaded vendor module", and kvm_intel /
//! kvm_amd load only on their vendor's CPUs). The *behavioural* flavour is measured: a CPL0
//! `cli` that raises the `insn_emulation` stat means a host that emulates guest kernel code
//! (PVM); VMX and SVM run it on the CPU. Both are recorded.

use std::fmt;
use std::fs;
use std::path::Path;

use kvm_ioctls::Kvm;

use crate::results::{FlavourRecord, KvmFlavour, Readable};

/// The vendor modules, each with the CPU vendors it can run on (`vendor_id` in /proc/cpuinfo).
const VENDOR_MODULES: [(&str, KvmFlavour, &[&str]); 3] = [
    (
        "kvm_intel",
        KvmFlavour::Vmx,
        &["GenuineIntel", "CentaurHauls", "Shanghai"],
    ),
    (
        "kvm_amd",
        KvmFlavour::Svm,
        &["AuthenticAMD", "HygonGenuine"],
    ),
    ("kvm_pvm", KvmFlavour::Pvm, &[]),
];

/// A vendor module the host has.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VendorModule {
    pub name: &'static str,
    pub flavour: KvmFlavour,
    /// `live` (a loaded module), `built-in` (only `parameters` under /sys/module: init may
    /// have failed), or the state /proc/modules shows.
    pub state: String,
}

impl fmt::Display for VendorModule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name, self.state)
    }
}

/// The vendor modules present under `root` (`sys/module/<name>`, or in containers that hide
/// it, `proc/modules`).
pub fn vendor_modules_in(root: &Path) -> Vec<VendorModule> {
    let proc_modules = fs::read_to_string(root.join("proc/modules")).unwrap_or_default();
    VENDOR_MODULES
        .iter()
        .filter_map(|&(name, flavour, _)| {
            let dir = root.join("sys/module").join(name);
            let state = if dir.is_dir() {
                match fs::read_to_string(dir.join("initstate")) {
                    Ok(s) => s.trim().to_owned(),
                    Err(_) => "built-in".to_owned(),
                }
            } else {
                let line = proc_modules
                    .lines()
                    .find(|l| l.split_whitespace().next() == Some(name))?;
                line.split_whitespace()
                    .nth(4)
                    .unwrap_or("loaded")
                    .to_ascii_lowercase()
            };
            Some(VendorModule {
                name,
                flavour,
                state,
            })
        })
        .collect()
}

/// What the host says about the device that was opened.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Declaration {
    pub modules: Vec<VendorModule>,
    /// `vendor_id` of /proc/cpuinfo.
    pub cpu_vendor: Option<String>,
    /// Whether the opened fd's `KVM_GET_SUPPORTED_CPUID` carries the PVM vendor signature;
    /// `None` when it was not asked.
    pub pvm_signature: Option<bool>,
}

/// The CPUID leaf where PVM's KVM puts its vendor features and signature (and leaf
/// 0x40000000 EAX points to it), and that signature, "PVM\0" (virt-pvm/linux,
/// arch/x86/kvm/cpuid.c and arch/x86/include/uapi/asm/kvm_para.h).
pub const KVM_CPUID_VENDOR_FEATURES: u32 = 0x4000_0002;
pub const PVM_CPUID_SIGNATURE: u32 = 0x004d_5650;

/// Whether `leaves` (function, eax, ebx) of a supported CPUID carry the PVM signature.
pub fn has_pvm_signature(leaves: &[(u32, u32, u32)]) -> bool {
    let points_to_vendor_leaf = leaves
        .iter()
        .any(|&(f, eax, _)| f == 0x4000_0000 && eax >= KVM_CPUID_VENDOR_FEATURES);
    points_to_vendor_leaf
        && leaves
            .iter()
            .any(|&(f, _, ebx)| f == KVM_CPUID_VENDOR_FEATURES && ebx == PVM_CPUID_SIGNATURE)
}

/// The declared flavour and how it was decided.
pub fn declare(d: &Declaration) -> (KvmFlavour, String) {
    if d.pvm_signature == Some(true) {
        return (
            KvmFlavour::Pvm,
            "the opened device's KVM_GET_SUPPORTED_CPUID carries the PVM vendor signature \
             (leaf 0x40000002)"
                .into(),
        );
    }
    let vendor = d.cpu_vendor.as_deref().unwrap_or("");
    let hardware = d.modules.iter().find(|m| {
        VENDOR_MODULES.iter().any(|&(name, _, vendors)| {
            name == m.name
                && (vendors.contains(&vendor) || (vendor.is_empty() && !vendors.is_empty()))
        })
    });
    let pvm = d.modules.iter().any(|m| m.flavour == KvmFlavour::Pvm);
    // From here the device's CPUID has no PVM signature (`Some(false)`) or was not asked.
    match (hardware, pvm, d.pvm_signature) {
        (Some(m), _, Some(_)) => (
            m.flavour,
            format!(
                "{m} is the vendor module for this {vendor} CPU, and the opened device's \
                 CPUID has no PVM signature"
            ),
        ),
        (Some(m), false, None) => (m.flavour, format!("{m} is the only vendor module")),
        (Some(m), true, None) => (
            m.flavour,
            format!(
                "{m} and kvm_pvm are both present and the device was not asked: assumed the \
                 hardware module (the behaviour check decides)"
            ),
        ),
        (None, true, signature) => (
            KvmFlavour::Pvm,
            format!(
                "kvm_pvm is the only vendor module for this {} CPU{}",
                if vendor.is_empty() { "unknown" } else { vendor },
                if signature.is_some() {
                    " (the device's supported CPUID carries no vendor signature)"
                } else {
                    ""
                }
            ),
        ),
        (None, false, _) => (
            KvmFlavour::Unknown,
            format!(
                "no vendor module for this {} CPU under /sys/module or in /proc/modules",
                if vendor.is_empty() { "unknown" } else { vendor }
            ),
        ),
    }
}

/// The declared flavour from the host's files under `root`, without a KVM fd to ask.
#[cfg(test)]
pub fn declare_in(root: &Path) -> (KvmFlavour, String) {
    declare(&Declaration {
        modules: vendor_modules_in(root),
        cpu_vendor: cpu_vendor_in(root),
        pvm_signature: None,
    })
}

fn cpu_vendor_in(root: &Path) -> Option<String> {
    let cpuinfo = fs::read_to_string(root.join("proc/cpuinfo")).ok()?;
    super::cpuinfo_field(&cpuinfo, "vendor_id").map(str::to_owned)
}

/// The node that was opened, checked against the kvm misc device the kernel registered.
pub fn device_text(
    path: &Path,
    opened: Option<(u32, u32)>,
    misc_dev: Option<&str>,
) -> Readable<String> {
    let Some((major, minor)) = opened else {
        return Readable::Unavailable(format!("cannot stat {}", path.display()));
    };
    let number = format!("{major}:{minor}");
    let verdict = match misc_dev.map(str::trim) {
        Some(misc) if misc == number => ", the kvm misc device of /sys/class/misc/kvm/dev".into(),
        Some(misc) => format!("; /sys/class/misc/kvm/dev is {misc}: not the kvm misc device"),
        None => "; /sys/class/misc/kvm/dev unreadable".into(),
    };
    Readable::Value(format!("{} ({number}{verdict})", path.display()))
}

/// Whether the opened fd's `KVM_GET_SUPPORTED_CPUID` carries the PVM signature (`None` when
/// the ioctl fails).
fn ask_device(kvm: &Kvm) -> Option<bool> {
    let cpuid = crate::kvm::supported_cpuid(kvm).ok()?;
    let leaves: Vec<(u32, u32, u32)> = cpuid
        .as_slice()
        .iter()
        .map(|e| (e.function, e.eax, e.ebx))
        .collect();
    Some(has_pvm_signature(&leaves))
}

/// The major:minor of the character device at `path`.
fn device_number(path: &Path) -> Option<(u32, u32)> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let meta = fs::metadata(path).ok()?;
    meta.file_type()
        .is_char_device()
        .then(|| (libc::major(meta.rdev()), libc::minor(meta.rdev())))
}

/// The flavour record of the device `kvm` was opened from (`path`), with the host's files
/// under `root`. The behaviour is probed later, in a guest.
pub fn detect(kvm: &Kvm, path: &Path, root: &Path) -> FlavourRecord {
    let declaration = Declaration {
        modules: vendor_modules_in(root),
        cpu_vendor: cpu_vendor_in(root),
        pvm_signature: ask_device(kvm),
    };
    let (declared, declared_by) = declare(&declaration);
    let misc = fs::read_to_string(root.join("sys/class/misc/kvm/dev")).ok();
    FlavourRecord {
        declared,
        declared_by,
        ambiguous: is_ambiguous(&declaration),
        behavioural: None,
        modules: declaration
            .modules
            .iter()
            .map(ToString::to_string)
            .collect(),
        device: device_text(path, device_number(path), misc.as_deref()),
        behaviour: Readable::Unavailable("not probed".into()),
    }
}

/// Whether the declaration chose between kvm_pvm and a hardware module that are both present
/// without the device saying which serves it: then the behaviour decides.
fn is_ambiguous(d: &Declaration) -> bool {
    let pvm = d.modules.iter().any(|m| m.flavour == KvmFlavour::Pvm);
    let hardware = d.modules.iter().any(|m| m.flavour != KvmFlavour::Pvm);
    pvm && hardware && d.pvm_signature != Some(true)
}

#[cfg(test)]
mod tests {
    use vmm_sys_util::tempdir::TempDir;

    use super::*;
    use crate::results::host::{agrees, classify};

    /// A fake root with `cpuinfo` vendor and the given /sys/module entries (`Some(state)`:
    /// loaded with that initstate; `None`: built-in).
    fn fake_root(vendor: &str, modules: &[(&str, Option<&str>)]) -> TempDir {
        let dir = TempDir::new().unwrap();
        let root = dir.as_path();
        fs::create_dir_all(root.join("proc")).unwrap();
        fs::write(
            root.join("proc/cpuinfo"),
            format!("processor\t: 0\nvendor_id\t: {vendor}\n"),
        )
        .unwrap();
        for (name, state) in modules {
            let m = root.join("sys/module").join(name);
            fs::create_dir_all(m.join("parameters")).unwrap();
            if let Some(s) = state {
                fs::write(m.join("initstate"), format!("{s}\n")).unwrap();
            }
        }
        dir
    }

    #[test]
    fn a_pvm_module_beside_the_hardware_module_is_not_taken_for_the_device() {
        // kvm_intel built in (and serving: no PVM signature in the device's CPUID), kvm_pvm
        // built in beside it: the old precedence called this host PVM.
        let dir = fake_root("GenuineIntel", &[("kvm_intel", None), ("kvm_pvm", None)]);
        let mut d = Declaration {
            modules: vendor_modules_in(dir.as_path()),
            cpu_vendor: cpu_vendor_in(dir.as_path()),
            pvm_signature: Some(false),
        };
        let (flavour, why) = declare(&d);
        assert_eq!(flavour, KvmFlavour::Vmx, "{why}");
        assert!(why.contains("no PVM signature"), "{why}");
        // The same tree with the signature in the device's CPUID: PVM serves it.
        d.pvm_signature = Some(true);
        assert_eq!(declare(&d).0, KvmFlavour::Pvm);
        // And without asking the device, the hardware module is assumed, saying so.
        let (flavour, why) = declare_in(dir.as_path());
        assert_eq!(flavour, KvmFlavour::Vmx);
        assert!(why.contains("behaviour check decides"), "{why}");
    }

    #[test]
    fn the_cpu_vendor_picks_between_built_in_hardware_modules() {
        // Distribution kernels build both; only the CPU's own can have initialised.
        let dir = fake_root("AuthenticAMD", &[("kvm_intel", None), ("kvm_amd", None)]);
        assert_eq!(declare_in(dir.as_path()).0, KvmFlavour::Svm);
        let dir = fake_root("GenuineIntel", &[("kvm_amd", Some("live"))]);
        let (flavour, why) = declare_in(dir.as_path());
        assert_eq!(flavour, KvmFlavour::Unknown, "{why}");
    }

    #[test]
    fn this_hosts_layout_pvm_alone_is_pvm() {
        // As on our hosts: kvm_pvm built in, no hardware module, AMD CPU.
        let dir = fake_root("AuthenticAMD", &[("kvm_pvm", None)]);
        let modules = vendor_modules_in(dir.as_path());
        assert_eq!(modules[0].to_string(), "kvm_pvm (built-in)");
        assert_eq!(declare_in(dir.as_path()).0, KvmFlavour::Pvm);
        let dir = fake_root("AuthenticAMD", &[]);
        assert_eq!(declare_in(dir.as_path()).0, KvmFlavour::Unknown);
    }

    #[test]
    fn proc_modules_is_the_fallback_when_sys_module_is_hidden() {
        let dir = fake_root("AuthenticAMD", &[]);
        fs::write(
            dir.as_path().join("proc/modules"),
            "kvm_amd 155648 0 - Live 0x0\nkvm 1 1 kvm_amd, Live 0x0\n",
        )
        .unwrap();
        let modules = vendor_modules_in(dir.as_path());
        assert_eq!(modules.len(), 1);
        assert_eq!(modules[0].state, "live");
        assert_eq!(declare_in(dir.as_path()).0, KvmFlavour::Svm);
    }

    #[test]
    fn the_pvm_signature_needs_both_leaves() {
        let sig = (KVM_CPUID_VENDOR_FEATURES, 0, PVM_CPUID_SIGNATURE);
        assert!(has_pvm_signature(&[(0x4000_0000, 0x4000_0002, 0), sig]));
        // Leaf 0x40000000 of mainline KVM points to 0x40000001 only.
        assert!(!has_pvm_signature(&[(0x4000_0000, 0x4000_0001, 0), sig]));
        assert!(!has_pvm_signature(&[(0x4000_0000, 0x4000_0002, 0)]));
    }

    #[test]
    fn on_an_ambiguous_host_the_behaviour_decides() {
        // kvm_intel and kvm_pvm both built in, no signature: declared VMX by assumption.
        let dir = fake_root("GenuineIntel", &[("kvm_intel", None), ("kvm_pvm", None)]);
        let d = Declaration {
            modules: vendor_modules_in(dir.as_path()),
            cpu_vendor: cpu_vendor_in(dir.as_path()),
            pvm_signature: Some(false),
        };
        assert!(is_ambiguous(&d));
        let mut r = FlavourRecord {
            declared: declare(&d).0,
            ambiguous: true,
            modules: d.modules.iter().map(ToString::to_string).collect(),
            ..Default::default()
        };
        assert_eq!(r.declared, KvmFlavour::Vmx);
        // A CPL0 cli that is emulated: PVM serves the device after all.
        assert_eq!(r.record(classify(1.0)), KvmFlavour::Pvm);
        assert_eq!(r.behavioural, Some(KvmFlavour::Pvm));
        assert_eq!(r.record(classify(0.0)), KvmFlavour::Vmx);
        // Where the declaration is not ambiguous, the declared flavour stands (and the
        // validation's flavour check fails on a contradiction).
        r.ambiguous = false;
        assert_eq!(r.record(classify(1.0)), KvmFlavour::Vmx);
        let signed = Declaration {
            pvm_signature: Some(true),
            ..d
        };
        assert!(!is_ambiguous(&signed));
    }

    #[test]
    fn behaviour_classifies_and_is_compared_with_the_declaration() {
        let emulating = classify(1.0);
        let native = classify(0.0);
        assert!(emulating.emulates_cpl0 && !native.emulates_cpl0);
        assert_eq!(agrees(KvmFlavour::Pvm, &emulating), Some(true));
        assert_eq!(agrees(KvmFlavour::Vmx, &emulating), Some(false));
        assert_eq!(agrees(KvmFlavour::Svm, &native), Some(true));
        assert_eq!(agrees(KvmFlavour::Unknown, &native), None);
    }

    #[test]
    fn flavour_names_round_trip_and_old_strings_still_read() {
        for f in KvmFlavour::ALL {
            let json = serde_json::to_string(&f).unwrap();
            assert_eq!(json, format!("\"{}\"", f.name()));
            assert_eq!(serde_json::from_str::<KvmFlavour>(&json).unwrap(), f);
            assert_eq!(KvmFlavour::from(f.name()), f);
        }
        assert_eq!(
            serde_json::from_str::<KvmFlavour>("\"tdx\"").unwrap(),
            KvmFlavour::Unknown
        );
        assert_eq!(KvmFlavour::from("PVM".to_owned()), KvmFlavour::Pvm);
    }

    #[test]
    fn the_device_is_checked_against_the_misc_device() {
        let p = Path::new("/dev/kvm");
        let ok = device_text(p, Some((10, 232)), Some("10:232\n"));
        assert!(matches!(&ok, Readable::Value(t) if t.contains("the kvm misc device")));
        let other = device_text(p, Some((10, 233)), Some("10:232"));
        assert!(matches!(&other, Readable::Value(t) if t.contains("not the kvm misc device")));
        assert!(matches!(
            device_text(p, None, None),
            Readable::Unavailable(_)
        ));
    }
}
