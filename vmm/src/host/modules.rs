//! KVM module parameters that move the numbers, and whether APICv/AVIC is in effect.
//!
//! A parameter can say "on" while the VM runs without it: APICv and AVIC accelerate only an
//! in-kernel LAPIC (KVM inhibits them with `APICV_INHIBIT_REASON_ABSENT` until
//! KVM_CREATE_IRQCHIP, arch/x86/kvm/x86.c), and PVM turns them off at load (`hardware_setup`
//! sets `enable_apicv = 0`, arch/x86/kvm/pvm/pvm.c). So the manifest records, per irqchip
//! mode, whether APIC virtualization is in effect and why, beside the raw parameters.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use crate::machine::IrqchipMode;
use crate::results::{ApicvState, KvmFlavour, Readable};

/// Module parameters that change how often or how expensively guests exit, space-separated;
/// `None` takes every parameter the module has (PVM's are few and all matter).
const MODULE_PARAMS: [(&str, Option<&str>); 4] = [
    (
        "kvm_intel",
        Some(
            "enable_apicv ept unrestricted_guest vmentry_l1d_flush ple_gap ple_window nested \
             preemption_timer",
        ),
    ),
    (
        "kvm_amd",
        Some("avic vgif vnmi npt nested pause_filter_count"),
    ),
    (
        "kvm",
        Some("halt_poll_ns min_timer_period_us enable_vmware_backdoor"),
    ),
    ("kvm_pvm", None),
];

/// The parameters of the KVM modules present under `sys_module`, by `module.param`, and for
/// each wanted parameter of a present module that could not be read, why.
pub fn module_params_in(sys_module: &Path) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    let mut params = BTreeMap::new();
    let mut unavailable = BTreeMap::new();
    for (module, wanted) in MODULE_PARAMS {
        let dir = sys_module.join(module).join("parameters");
        if !sys_module.join(module).is_dir() {
            continue; // The module is not here: nothing to say about its parameters.
        }
        let names: Vec<String> = match wanted {
            Some(names) => names.split_whitespace().map(str::to_owned).collect(),
            None => list_dir(&dir),
        };
        for name in names {
            let key = format!("{module}.{name}");
            match fs::read_to_string(dir.join(&name)) {
                Ok(value) => {
                    params.insert(key, value.trim().to_owned());
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    unavailable.insert(key, "no such parameter in this kernel".to_owned());
                }
                Err(e) => {
                    unavailable.insert(key, format!("cannot read: {e}"));
                }
            }
        }
    }
    (params, unavailable)
}

fn list_dir(dir: &Path) -> Vec<String> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    names.sort();
    names
}

/// A boolean module parameter (`Y`/`N`, `1`/`0`).
fn param_bool(params: &BTreeMap<String, String>, key: &str) -> Option<bool> {
    match params.get(key)?.as_str() {
        "Y" | "y" | "1" => Some(true),
        "N" | "n" | "0" => Some(false),
        _ => None,
    }
}

/// Decides [`ApicvState`] from the flavour, the irqchip mode and the module parameters.
pub fn apicv_in_effect(
    flavour: KvmFlavour,
    irqchip: IrqchipMode,
    params: &BTreeMap<String, String>,
) -> ApicvState {
    let state = |in_effect: Readable<bool>, why: String| ApicvState {
        irqchip: irqchip.name().to_owned(),
        in_effect,
        why,
    };
    if irqchip == IrqchipMode::Userspace {
        return state(
            Readable::Value(false),
            "userspace irqchip: there is no in-kernel LAPIC to accelerate (KVM keeps \
             APICV_INHIBIT_REASON_ABSENT set until KVM_CREATE_IRQCHIP)"
                .into(),
        );
    }
    let (key, what) = match flavour {
        KvmFlavour::Pvm => {
            return state(
                Readable::Value(false),
                "kvm_pvm sets enable_apicv = 0 at load (no APIC virtualization)".into(),
            )
        }
        KvmFlavour::Unknown => {
            return state(
                Readable::Unavailable("the KVM flavour is unknown".into()),
                String::new(),
            )
        }
        KvmFlavour::Vmx => ("kvm_intel.enable_apicv", "APICv"),
        KvmFlavour::Svm => ("kvm_amd.avic", "AVIC"),
    };
    match param_bool(params, key) {
        Some(on) => state(
            Readable::Value(on),
            format!(
                "{key}={} ({what} {}; KVM clears the parameter at load where the CPU lacks \
                 it, and run-time inhibits can still suspend it)",
                params.get(key).map_or("", String::as_str),
                if on { "on" } else { "off" }
            ),
        ),
        None => state(
            Readable::Unavailable(format!("{key} is not readable")),
            String::new(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use vmm_sys_util::tempdir::TempDir;

    use super::*;

    #[test]
    fn module_params_are_read_and_missing_ones_explained() {
        let dir = TempDir::new().unwrap();
        let root = dir.as_path();
        fs::create_dir_all(root.join("kvm/parameters")).unwrap();
        fs::write(root.join("kvm/parameters/halt_poll_ns"), "200000\n").unwrap();
        fs::write(root.join("kvm/parameters/min_timer_period_us"), "200\n").unwrap();
        fs::write(root.join("kvm/parameters/ignore_msrs"), "N\n").unwrap();
        fs::create_dir_all(root.join("kvm_pvm/parameters")).unwrap();
        fs::write(root.join("kvm_pvm/parameters/stats"), "Y\n").unwrap();
        fs::create_dir_all(root.join("kvm_amd/parameters")).unwrap();
        fs::write(root.join("kvm_amd/parameters/avic"), "1\n").unwrap();
        let (params, unavailable) = module_params_in(root);
        let expected: BTreeMap<String, String> = [
            ("kvm.halt_poll_ns", "200000"),
            ("kvm.min_timer_period_us", "200"),
            ("kvm_amd.avic", "1"),
            ("kvm_pvm.stats", "Y"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        assert_eq!(params, expected);
        // Parameters of present modules are explained; kvm_intel is absent, so says nothing.
        assert_eq!(
            unavailable.get("kvm_amd.vnmi").map(String::as_str),
            Some("no such parameter in this kernel")
        );
        assert!(unavailable.contains_key("kvm.enable_vmware_backdoor"));
        assert!(!unavailable.keys().any(|k| k.starts_with("kvm_intel.")));
    }

    fn params(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn apicv_follows_the_irqchip_mode_before_the_parameter() {
        let on = params(&[("kvm_intel.enable_apicv", "Y"), ("kvm_amd.avic", "1")]);
        for flavour in KvmFlavour::ALL {
            let s = apicv_in_effect(flavour, IrqchipMode::Userspace, &on);
            assert_eq!(s.in_effect, Readable::Value(false), "{flavour}");
            assert!(s.why.contains("userspace irqchip"));
        }
        let k = IrqchipMode::InKernel;
        assert_eq!(
            apicv_in_effect(KvmFlavour::Vmx, k, &on).in_effect,
            Readable::Value(true)
        );
        assert_eq!(
            apicv_in_effect(KvmFlavour::Svm, k, &on).in_effect,
            Readable::Value(true)
        );
        // PVM ignores the parameters: it turns APIC virtualization off at load.
        assert_eq!(
            apicv_in_effect(KvmFlavour::Pvm, k, &on).in_effect,
            Readable::Value(false)
        );
        let off = params(&[("kvm_intel.enable_apicv", "N"), ("kvm_amd.avic", "0")]);
        assert_eq!(
            apicv_in_effect(KvmFlavour::Svm, k, &off).in_effect,
            Readable::Value(false)
        );
        assert!(matches!(
            apicv_in_effect(KvmFlavour::Vmx, k, &BTreeMap::new()).in_effect,
            Readable::Unavailable(_)
        ));
    }
}
