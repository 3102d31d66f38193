//! Facts about the host CPU that decide guest code paths, as pure functions of CPUID values so
//! that both vendors are tested on whichever host runs the tests:
//!
//! - the vendor (CPUID leaf 0) decides the hypercall instruction: KVM expects `vmcall` on Intel
//!   VMX and `vmmcall` on AMD SVM, and rewrites the other one in guest memory when the guest
//!   executes it (arch/x86/kvm/x86.c `emulator_fix_hypercall`, the default-on
//!   `KVM_X86_QUIRK_FIX_HYPERCALL_INSN`) — it would patch the very code irqbench measures;
//! - the virtual PMU KVM offers (KVM_GET_SUPPORTED_CPUID leaf 0xA) decides whether guest core
//!   cycles could be counted (`IA32_FIXED_CTR1`) instead of TSC cycles.

use crate::results::{CyclesSource, KvmFlavour, Vpmu};
use serde::{Deserialize, Serialize};

/// The host CPU's vendor, from the 12-byte string of CPUID leaf 0 (EBX, EDX, ECX).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Vendor {
    /// `GenuineIntel`.
    Intel,
    /// `AuthenticAMD`.
    Amd,
    /// `HygonGenuine`: AMD's SVM and `vmmcall`.
    Hygon,
    /// `CentaurHauls` or `  Shanghai  `: Intel's VMX and `vmcall`.
    Zhaoxin,
    /// Anything else, as read.
    Other(String),
}

impl Vendor {
    /// From CPUID leaf 0's EBX, EDX and ECX (in that order they spell the vendor string).
    pub fn from_cpuid0(ebx: u32, edx: u32, ecx: u32) -> Vendor {
        let mut bytes = [0u8; 12];
        bytes[..4].copy_from_slice(&ebx.to_le_bytes());
        bytes[4..8].copy_from_slice(&edx.to_le_bytes());
        bytes[8..].copy_from_slice(&ecx.to_le_bytes());
        match &bytes {
            b"GenuineIntel" => Vendor::Intel,
            b"AuthenticAMD" => Vendor::Amd,
            b"HygonGenuine" => Vendor::Hygon,
            b"CentaurHauls" | b"  Shanghai  " => Vendor::Zhaoxin,
            other => Vendor::Other(String::from_utf8_lossy(other).into_owned()),
        }
    }

    pub fn name(&self) -> String {
        match self {
            Vendor::Intel => "GenuineIntel".into(),
            Vendor::Amd => "AuthenticAMD".into(),
            Vendor::Hygon => "HygonGenuine".into(),
            Vendor::Zhaoxin => "CentaurHauls".into(),
            Vendor::Other(s) => s.clone(),
        }
    }
}

/// The vendor of the CPU this process runs on (CPUID leaf 0).
pub fn host_vendor() -> Vendor {
    let r = cpuid(0, 0);
    Vendor::from_cpuid0(r.ebx, r.edx, r.ecx)
}

/// The hypervisor's signature (CPUID leaf 0x40000000, EBX ECX EDX) when CPUID.1:ECX[31] says
/// there is one: `KVMKVMKVM`, `TCGTCGTCGTCG`, `Microsoft Hv`, ...
pub fn hypervisor_signature() -> Option<String> {
    if cpuid(1, 0).ecx & (1 << 31) == 0 {
        return None;
    }
    let r = cpuid(0x4000_0000, 0);
    let bytes: Vec<u8> = [r.ebx, r.ecx, r.edx]
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect();
    Some(
        String::from_utf8_lossy(&bytes)
            .trim_end_matches('\0')
            .to_string(),
    )
}

/// Whether the CPU this process runs on is emulated instruction by instruction (QEMU's TCG,
/// Bochs) rather than run by hardware, and by what: from the hypervisor signature and the
/// machine's DMI vendor, product and BIOS vendor (`sys_vendor`, `product_name`, `bios_vendor`
/// under `dmi`: Bochs leaves the first two empty and names itself in the third). Its timing
/// (TSC invariance, tick delivery, TSC agreement between vCPUs) is the emulator's, not a
/// CPU's; its KVM's exit counts and reasons are still KVM's own.
pub fn emulated_cpu(
    signature: Option<&str>,
    dmi_vendor: &str,
    dmi_product: &str,
    bios_vendor: &str,
) -> Option<String> {
    if signature == Some("TCGTCGTCGTCG") {
        return Some("QEMU TCG (hypervisor signature TCGTCGTCGTCG)".into());
    }
    let dmi = format!("{dmi_vendor} {dmi_product}").to_ascii_lowercase();
    let bochs_bios = bios_vendor.to_ascii_lowercase().contains("bochs");
    if (dmi.contains("bochs") || bochs_bios) && signature.is_none() {
        return Some(format!(
            "Bochs (DMI {}; no hypervisor signature)",
            format!("{dmi_vendor} {dmi_product} {bios_vendor}").trim()
        ));
    }
    // QEMU with KVM acceleration says KVMKVMKVM: a nested guest, not an emulated CPU.
    if dmi.contains("qemu") && signature.is_none_or(|s| s.is_empty() || s == "TCGTCGTCGTCG") {
        return Some(format!(
            "QEMU without KVM (DMI {}; hypervisor signature {})",
            format!("{dmi_vendor} {dmi_product}").trim(),
            signature.unwrap_or("none")
        ));
    }
    None
}

pub(crate) fn cpuid(leaf: u32, subleaf: u32) -> std::arch::x86_64::CpuidResult {
    // `__cpuid_count` is an `unsafe fn` on older toolchains and safe on newer ones.
    #[allow(unused_unsafe)]
    // SAFETY: CPUID exists on every x86-64 CPU and only writes the four result registers.
    unsafe {
        std::arch::x86_64::__cpuid_count(leaf, subleaf)
    }
}

/// The instruction that enters the hypervisor for a KVM hypercall.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HypercallInsn {
    Vmcall,
    Vmmcall,
}

impl HypercallInsn {
    pub fn name(self) -> &'static str {
        match self {
            HypercallInsn::Vmcall => "vmcall",
            HypercallInsn::Vmmcall => "vmmcall",
        }
    }

    /// The id the guest reads (`PhaseDescriptor::hypercall_insn`).
    pub fn abi_id(self) -> u32 {
        match self {
            HypercallInsn::Vmcall => irqbench_abi::hypercall_insn::VMCALL,
            HypercallInsn::Vmmcall => irqbench_abi::hypercall_insn::VMMCALL,
        }
    }
}

/// The hypercall instruction native to `vendor`'s virtualization extension (VMX: `vmcall`,
/// SVM: `vmmcall`); `None` for a vendor irqbench does not know.
pub fn hypercall_insn(vendor: &Vendor) -> Option<HypercallInsn> {
    match vendor {
        Vendor::Intel | Vendor::Zhaoxin => Some(HypercallInsn::Vmcall),
        Vendor::Amd | Vendor::Hygon => Some(HypercallInsn::Vmmcall),
        Vendor::Other(_) => None,
    }
}

/// What the host offers a guest for counting core cycles, as read: the KVM flavour (`vmx`,
/// `svm`, `pvm`), leaf 0xA of KVM_GET_SUPPORTED_CPUID (`None` when KVM does not list it) and
/// `kvm.enable_pmu` (`None` when unreadable).
#[derive(Clone, Copy, Debug)]
pub struct PmuFacts {
    pub flavour: KvmFlavour,
    pub leaf_0xa: Option<(u32, u32)>,
    pub enable_pmu: Option<bool>,
}

/// Decides the cycle source. irqbench measures TSC cycles everywhere today; this records
/// whether core cycles could be measured instead, and why not (KVM zeroes leaf 0xA unless
/// `enable_pmu` is set and the host has an architectural PMU: arch/x86/kvm/cpuid.c
/// `__do_cpuid_func`).
pub fn cycles_source(vendor: &Vendor, facts: PmuFacts, tsc_khz: u64) -> CyclesSource {
    let vpmu = facts
        .leaf_0xa
        .map(|(eax, edx)| Vpmu::from_leaf_0xa(eax, edx));
    let available = vpmu.is_some_and(|p| p.has_core_cycle_counter());
    let param = match facts.enable_pmu {
        Some(false) => " (kvm.enable_pmu=N)",
        _ => "",
    };
    let reason = match (vendor, vpmu) {
        (_, p) if facts.flavour == KvmFlavour::Pvm && !available => format!(
            "CPUID leaf 0xA from KVM_GET_SUPPORTED_CPUID is {} on this PVM host{param}: it \
             offers the guest no PMU",
            if p.is_some() { "zero" } else { "absent" }
        ),
        (_, _) if facts.enable_pmu == Some(false) => {
            "kvm.enable_pmu=N: KVM offers the guest no PMU (CPUID leaf 0xA is zero)".into()
        }
        (_, Some(p)) if p.has_core_cycle_counter() => format!(
            "KVM offers an architectural PMU v{} with {} fixed counters (IA32_FIXED_CTR1 counts \
             core cycles), but irqbench's guest reads only the TSC so far",
            p.version, p.fixed_counters
        ),
        (Vendor::Amd | Vendor::Hygon, _) => "AMD CPUs have no fixed counters (CPUID leaf 0xA is \
             zero on SVM); core cycles would need a general-purpose counter"
            .into(),
        (_, Some(p)) if p.version == 0 => "CPUID leaf 0xA from KVM_GET_SUPPORTED_CPUID is zero: \
             no guest PMU (PVM, kvm.enable_pmu=0, or a host without an architectural PMU)"
            .into(),
        (_, Some(p)) => format!(
            "KVM's guest PMU v{} has {} fixed counters: no IA32_FIXED_CTR1",
            p.version, p.fixed_counters
        ),
        (_, None) => "KVM_GET_SUPPORTED_CPUID has no leaf 0xA: no guest PMU".into(),
    };
    CyclesSource {
        source: "tsc".into(),
        tsc_khz,
        vpmu,
        core_cycles_available: available,
        reason,
    }
}

/// Leaf 0xA (EAX, EDX) of KVM_GET_SUPPORTED_CPUID, if KVM lists it.
pub fn supported_leaf_0xa(kvm: &kvm_ioctls::Kvm) -> Option<(u32, u32)> {
    let cpuid = crate::kvm::supported_cpuid(kvm).ok()?;
    cpuid
        .as_slice()
        .iter()
        .find(|e| e.function == 0xA && e.index == 0)
        .map(|e| (e.eax, e.edx))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_emulated_cpu_is_told_by_its_signature_or_its_dmi() {
        assert!(emulated_cpu(Some("TCGTCGTCGTCG"), "QEMU", "Standard PC", "SeaBIOS").is_some());
        assert!(emulated_cpu(None, "", "Bochs", "").is_some());
        // Bochs 2.7's BIOS, as the vmx box's kernel reads it: "DMI:  , BIOS Bochs 2.7".
        assert!(emulated_cpu(None, "", "", "The Bochs Project").is_some());
        assert!(emulated_cpu(None, "QEMU", "Standard PC (i440FX + PIIX, 1996)", "").is_some());
        // QEMU with KVM, a cloud VM, bare metal: not emulated.
        assert_eq!(
            emulated_cpu(Some("KVMKVMKVM"), "QEMU", "Standard PC", "Bochs"),
            None
        );
        assert_eq!(
            emulated_cpu(
                Some("KVMKVMKVM"),
                "Google",
                "Google Compute Engine",
                "Google"
            ),
            None
        );
        assert_eq!(
            emulated_cpu(None, "Dell Inc.", "PowerEdge R750", "Dell Inc."),
            None
        );
    }

    /// The vendor string's three registers, as CPUID leaf 0 returns them.
    fn regs(vendor: &[u8; 12]) -> (u32, u32, u32) {
        let word = |i: usize| u32::from_le_bytes(vendor[i..i + 4].try_into().expect("4 bytes"));
        (word(0), word(4), word(8))
    }

    #[test]
    fn each_vendor_gets_its_own_hypercall_instruction() {
        for (string, vendor, insn) in [
            (b"GenuineIntel", Vendor::Intel, Some(HypercallInsn::Vmcall)),
            (b"AuthenticAMD", Vendor::Amd, Some(HypercallInsn::Vmmcall)),
            (b"HygonGenuine", Vendor::Hygon, Some(HypercallInsn::Vmmcall)),
            (
                b"CentaurHauls",
                Vendor::Zhaoxin,
                Some(HypercallInsn::Vmcall),
            ),
            (
                b"  Shanghai  ",
                Vendor::Zhaoxin,
                Some(HypercallInsn::Vmcall),
            ),
            (b"VIA VIA VIA ", Vendor::Other("VIA VIA VIA ".into()), None),
        ] {
            let (ebx, edx, ecx) = regs(string);
            let v = Vendor::from_cpuid0(ebx, edx, ecx);
            assert_eq!(v, vendor);
            assert_eq!(hypercall_insn(&v), insn, "{v:?}");
        }
        assert_eq!(HypercallInsn::Vmmcall.abi_id(), 1);
        assert_eq!(HypercallInsn::Vmcall.name(), "vmcall");
    }

    #[test]
    fn the_host_vendor_agrees_with_proc_cpuinfo() {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let Some(line) = cpuinfo.lines().find(|l| l.starts_with("vendor_id")) else {
            return;
        };
        let want = line.split_once(':').map(|(_, v)| v.trim()).unwrap_or("");
        assert_eq!(host_vendor().name().trim(), want);
    }

    #[test]
    fn core_cycles_need_pmu_v2_with_two_fixed_counters() {
        // A Skylake-like leaf 0xA: v4, 4 GP counters, 3 fixed counters of 48 bits.
        let eax = 4 | (4 << 8) | (48 << 16) | (7 << 24);
        let edx = 3 | (48 << 5);
        let facts = |flavour, leaf_0xa, enable_pmu| PmuFacts {
            flavour,
            leaf_0xa,
            enable_pmu,
        };
        let s = cycles_source(
            &Vendor::Intel,
            facts(KvmFlavour::Vmx, Some((eax, edx)), Some(true)),
            1,
        );
        assert!(s.core_cycles_available, "{s:?}");
        assert_eq!(s.source, "tsc");
        assert_eq!(
            s.vpmu,
            Some(Vpmu {
                version: 4,
                gp_counters: 4,
                fixed_counters: 3,
                fixed_width: 48
            })
        );
        assert!(s.reason.contains("IA32_FIXED_CTR1"), "{}", s.reason);

        // Version 1 (no fixed counters), the all-zero leaf of PVM, and no leaf at all.
        let v1 = cycles_source(
            &Vendor::Intel,
            facts(KvmFlavour::Vmx, Some((1 | (2 << 8), 0)), None),
            1,
        );
        assert!(!v1.core_cycles_available);
        let zero = cycles_source(
            &Vendor::Intel,
            facts(KvmFlavour::Vmx, Some((0, 0)), None),
            1,
        );
        assert!(!zero.core_cycles_available);
        assert!(zero.reason.contains("zero"), "{}", zero.reason);
        let off = cycles_source(
            &Vendor::Intel,
            facts(KvmFlavour::Vmx, Some((0, 0)), Some(false)),
            1,
        );
        assert!(off.reason.starts_with("kvm.enable_pmu=N"), "{}", off.reason);
        let none = cycles_source(&Vendor::Intel, facts(KvmFlavour::Vmx, None, None), 1);
        assert!(!none.core_cycles_available && none.vpmu.is_none());
        // AMD: leaf 0xA is not how its PMU is described.
        let amd = cycles_source(
            &Vendor::Amd,
            facts(KvmFlavour::Svm, Some((0, 0)), Some(true)),
            1,
        );
        assert!(amd.reason.contains("AMD"), "{}", amd.reason);
        // PVM (this project's hosts) offers no guest PMU whatever the vendor.
        for vendor in [Vendor::Amd, Vendor::Intel] {
            let pvm = cycles_source(
                &vendor,
                facts(KvmFlavour::Pvm, Some((0, 0)), Some(false)),
                1,
            );
            assert!(!pvm.core_cycles_available);
            assert!(
                pvm.reason
                    .contains("zero on this PVM host (kvm.enable_pmu=N)"),
                "{}",
                pvm.reason
            );
        }
    }
}
