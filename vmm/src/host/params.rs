//! One kernel module parameter, read from sysfs, for checks that depend on its value (e.g.
//! `kvm.min_timer_period_us`, below which KVM lengthens periodic LAPIC timers).

use std::path::Path;

const SYS_MODULE: &str = "/sys/module";

/// `/sys/module/<module>/parameters/<name>`, trimmed; the error says which file and why.
pub fn kvm_param(module: &str, name: &str) -> Result<String, String> {
    kvm_param_in(Path::new(SYS_MODULE), module, name)
}

/// [`kvm_param`] under another sysfs module root (tests).
pub fn kvm_param_in(root: &Path, module: &str, name: &str) -> Result<String, String> {
    super::read_fact(&root.join(module).join("parameters").join(name))
}

#[cfg(test)]
mod tests {
    use vmm_sys_util::tempdir::TempDir;

    use super::*;

    #[test]
    fn a_parameter_is_read_trimmed_and_a_missing_one_names_its_file() {
        let dir = TempDir::new().expect("tempdir");
        let params = dir.as_path().join("kvm/parameters");
        std::fs::create_dir_all(&params).expect("mkdir");
        std::fs::write(params.join("min_timer_period_us"), "200\n").expect("write");
        assert_eq!(
            kvm_param_in(dir.as_path(), "kvm", "min_timer_period_us").as_deref(),
            Ok("200")
        );
        let err = kvm_param_in(dir.as_path(), "kvm", "nope").expect_err("missing");
        assert!(err.contains("kvm/parameters/nope"), "{err}");
    }
}
