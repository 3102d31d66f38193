//! The host as a report records it: the flavour record, facts that may be unreadable, pinning,
//! APICv, the cycle source. Pure data; host/ reads these facts.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// Which vendor module serves the KVM device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KvmFlavour {
    /// `kvm_intel`: Intel VT-x.
    Vmx,
    /// `kvm_amd`: AMD-V.
    Svm,
    /// `kvm_pvm`: paravirtualized guests on hosts without (usable) VMX/SVM; guest CPL0 code is
    /// emulated.
    Pvm,
    /// No vendor module could be identified (or a name this irqbench does not know, read from
    /// a results file).
    #[default]
    #[serde(other)]
    Unknown,
}

impl KvmFlavour {
    pub const ALL: [KvmFlavour; 4] = [
        KvmFlavour::Vmx,
        KvmFlavour::Svm,
        KvmFlavour::Pvm,
        KvmFlavour::Unknown,
    ];

    pub fn name(&self) -> &'static str {
        match self {
            KvmFlavour::Vmx => "vmx",
            KvmFlavour::Svm => "svm",
            KvmFlavour::Pvm => "pvm",
            KvmFlavour::Unknown => "unknown",
        }
    }

    /// The vendor module that provides this flavour.
    pub fn module(&self) -> Option<&'static str> {
        match self {
            KvmFlavour::Vmx => Some("kvm_intel"),
            KvmFlavour::Svm => Some("kvm_amd"),
            KvmFlavour::Pvm => Some("kvm_pvm"),
            KvmFlavour::Unknown => None,
        }
    }

    /// Whether this flavour runs guest CPL0 code on the CPU (`Some(true)`: VMX, SVM) or
    /// emulates it (`Some(false)`: PVM).
    pub fn runs_cpl0_natively(&self) -> Option<bool> {
        match self {
            KvmFlavour::Vmx | KvmFlavour::Svm => Some(true),
            KvmFlavour::Pvm => Some(false),
            KvmFlavour::Unknown => None,
        }
    }
}

impl fmt::Display for KvmFlavour {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Names as written in manifests (`"pvm"`); anything else is `Unknown`.
impl From<&str> for KvmFlavour {
    fn from(name: &str) -> KvmFlavour {
        KvmFlavour::ALL
            .into_iter()
            .find(|f| f.name().eq_ignore_ascii_case(name.trim()))
            .unwrap_or(KvmFlavour::Unknown)
    }
}

impl From<String> for KvmFlavour {
    fn from(name: String) -> KvmFlavour {
        KvmFlavour::from(name.as_str())
    }
}

/// What a CPL0 `cli` does to the `insn_emulation` stat, measured in a guest.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Behaviour {
    /// Net `insn_emulation` per `cli` (cli block − empty block, per instruction).
    pub insn_emulation_per_cli: f64,
    /// CPL0 code is emulated (PVM), not run by the CPU (VMX, SVM).
    pub emulates_cpl0: bool,
}

/// Half an emulation per `cli` or more: the host emulates guest kernel code (PVM counts one
/// per emulated instruction; VMX and SVM none, as `cli` does not exit).
pub fn classify(insn_emulation_per_cli: f64) -> Behaviour {
    Behaviour {
        insn_emulation_per_cli,
        emulates_cpl0: insn_emulation_per_cli >= 0.5,
    }
}

/// Whether the behaviour matches the declared flavour (`None` for `Unknown`).
pub fn agrees(declared: KvmFlavour, b: &Behaviour) -> Option<bool> {
    declared
        .runs_cpl0_natively()
        .map(|native| native != b.emulates_cpl0)
}

/// The flavour a behaviour points to among the vendor modules present (`modules` as recorded,
/// `kvm_pvm (built-in)`): emulation is PVM's; native execution the hardware module's.
pub fn behavioural(modules: &[String], declared: KvmFlavour, b: &Behaviour) -> KvmFlavour {
    let present = |f: KvmFlavour| {
        f.module()
            .is_some_and(|name| modules.iter().any(|m| m.split(' ').next() == Some(name)))
    };
    if b.emulates_cpl0 {
        return if present(KvmFlavour::Pvm) {
            KvmFlavour::Pvm
        } else {
            KvmFlavour::Unknown
        };
    }
    if declared.runs_cpl0_natively() == Some(true) {
        return declared;
    }
    match (present(KvmFlavour::Vmx), present(KvmFlavour::Svm)) {
        (true, false) => KvmFlavour::Vmx,
        (false, true) => KvmFlavour::Svm,
        _ => KvmFlavour::Unknown,
    }
}

/// The manifest's record of the flavour: declared, how, and the behaviour seen.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FlavourRecord {
    pub declared: KvmFlavour,
    /// The evidence that decided `declared`.
    pub declared_by: String,
    /// kvm_pvm and a hardware module are both present and the device did not say which
    /// serves it: the behaviour decides the flavour the run reports.
    #[serde(default)]
    pub ambiguous: bool,
    /// The flavour the behaviour points to (`None` until probed).
    #[serde(default)]
    pub behavioural: Option<KvmFlavour>,
    /// Vendor modules present, with their state (`kvm_pvm (built-in)`).
    pub modules: Vec<String>,
    /// The device node opened and its number.
    pub device: Readable<String>,
    /// Measured by booting a guest (`irqbench host`, `validate`, `run`'s quick checks).
    pub behaviour: Readable<Behaviour>,
}

impl FlavourRecord {
    /// Records a measured behaviour; returns the flavour the run should report: the declared
    /// one, or where the declaration was ambiguous and the behaviour disagrees, the behaviour's.
    pub fn record(&mut self, b: Behaviour) -> KvmFlavour {
        let beh = behavioural(&self.modules, self.declared, &b);
        self.behavioural = Some(beh);
        self.behaviour = Readable::Value(b);
        if self.ambiguous && beh != KvmFlavour::Unknown {
            beh
        } else {
            self.declared
        }
    }
}

impl Default for FlavourRecord {
    fn default() -> Self {
        FlavourRecord {
            declared: KvmFlavour::Unknown,
            declared_by: String::new(),
            ambiguous: false,
            behavioural: None,
            modules: Vec::new(),
            device: Readable::default(),
            behaviour: Readable::Unavailable("not probed".into()),
        }
    }
}

/// A host fact, or why it could not be read. JSON: `{"value": …}` or `{"unavailable": "…"}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Readable<T> {
    Value(T),
    Unavailable(String),
}

impl<T> Default for Readable<T> {
    /// What a results file written before the field existed reads as.
    fn default() -> Self {
        Readable::Unavailable("not recorded".into())
    }
}

impl<T> Readable<T> {
    pub fn value(&self) -> Option<&T> {
        match self {
            Readable::Value(v) => Some(v),
            Readable::Unavailable(_) => None,
        }
    }

    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Readable<U> {
        match self {
            Readable::Value(v) => Readable::Value(f(v)),
            Readable::Unavailable(why) => Readable::Unavailable(why),
        }
    }

    /// The value through `show`, or `unavailable (why)`.
    pub fn text(&self, show: impl FnOnce(&T) -> String) -> String {
        match self {
            Readable::Value(v) => show(v),
            Readable::Unavailable(why) => format!("unavailable ({why})"),
        }
    }
}

impl<T> From<Result<T, String>> for Readable<T> {
    fn from(r: Result<T, String>) -> Self {
        match r {
            Ok(v) => Readable::Value(v),
            Err(why) => Readable::Unavailable(why),
        }
    }
}

/// Frequency scaling: the governors in use and whether boost (turbo) is on.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuFreq {
    /// `scaling_driver` of the first policy.
    pub driver: String,
    /// Governor → the CPUs (policies' `affected_cpus`) it runs.
    pub governors: BTreeMap<String, Vec<u32>>,
    pub boost: Readable<bool>,
}

/// Simultaneous multithreading, as /sys/devices/system/cpu/smt reports it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Smt {
    /// `on`, `off`, `forceoff`, `notsupported` or `notimplemented`.
    pub control: String,
    pub active: bool,
}

/// Where the vCPU threads ran.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Pinning {
    pub pinned: bool,
    /// The host CPUs the vCPU threads were pinned to (vCPU i → `cpus[i]`); empty if not.
    pub cpus: Vec<u32>,
    /// /sys/devices/system/cpu/isolated (`isolcpus=`): CPUs the scheduler keeps other work off.
    pub isolated_cpus: Readable<Vec<u32>>,
    /// Every pinned CPU is isolated (`None` when not pinned or the list is unreadable).
    pub on_isolated: Option<bool>,
}

/// Whether APIC virtualization (Intel APICv, AMD AVIC) accelerates a VM of one irqchip mode.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ApicvState {
    /// `in-kernel` or `userspace`.
    pub irqchip: String,
    pub in_effect: Readable<bool>,
    pub why: String,
}

/// The architectural PMU KVM offers a guest (CPUID leaf 0xA, Intel SDM vol. 2A "Architectural
/// Performance Monitoring Leaf").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Vpmu {
    /// EAX[7:0].
    pub version: u8,
    /// EAX[15:8].
    pub gp_counters: u8,
    /// EDX[4:0].
    pub fixed_counters: u8,
    /// EDX[12:5].
    pub fixed_width: u8,
}

impl Vpmu {
    pub fn from_leaf_0xa(eax: u32, edx: u32) -> Vpmu {
        Vpmu {
            version: (eax & 0xFF) as u8,
            gp_counters: ((eax >> 8) & 0xFF) as u8,
            fixed_counters: (edx & 0x1F) as u8,
            fixed_width: ((edx >> 5) & 0xFF) as u8,
        }
    }

    /// `IA32_FIXED_CTR1` (CPU_CLK_UNHALTED.CORE) exists: version 2 or later with at least two
    /// fixed counters.
    pub fn has_core_cycle_counter(&self) -> bool {
        self.version >= 2 && self.fixed_counters >= 2 && self.fixed_width > 0
    }
}

/// What the cycle figures of a run count, and why not core cycles.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CyclesSource {
    /// `tsc`: the guest's time-stamp counter, which ticks at a constant rate (`tsc_khz`)
    /// whatever the core clock does, and keeps ticking while the vCPU is not running.
    pub source: String,
    pub tsc_khz: u64,
    /// The guest PMU KVM offers (CPUID leaf 0xA of KVM_GET_SUPPORTED_CPUID); absent when the
    /// leaf is missing.
    pub vpmu: Option<Vpmu>,
    /// Whether KVM would let the guest count core cycles (`IA32_FIXED_CTR1`).
    pub core_cycles_available: bool,
    /// Why the figures are TSC cycles.
    pub reason: String,
}
