//! What kvm-ioctls lacks: the binary statistics fd ([`stats`]), KVM_INTERRUPT, and
//! KVM_GET_SUPPORTED_CPUID asked once per device. Thin, documented wrappers over the KVM API,
//! kept apart so they could move upstream.

use std::collections::HashMap;
use std::os::fd::AsRawFd;
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use kvm_bindings::{kvm_interrupt, CpuId, KVMIO, KVM_MAX_CPUID_ENTRIES};
use kvm_ioctls::{Kvm, VcpuFd};
use vmm_sys_util::ioctl::ioctl_with_ref;
use vmm_sys_util::ioctl_iow_nr;

pub mod stats;

// kvm-ioctls has no wrapper for KVM_INTERRUPT (userspace irqchip injection).
ioctl_iow_nr!(KVM_INTERRUPT, KVMIO, 0x86, kvm_interrupt);

/// KVM_INTERRUPT: queue external interrupt `vector` on a vCPU of a VM without an in-kernel
/// irqchip. KVM API: valid only with a userspace irqchip, and only when kvm_run's
/// `ready_for_interrupt_injection` is set; EEXIST means one is already queued.
pub fn interrupt(vcpu: &VcpuFd, vector: u8) -> std::io::Result<()> {
    let irq = kvm_interrupt {
        irq: u32::from(vector),
    };
    // SAFETY: KVM_INTERRUPT reads a kvm_interrupt from the pointer; `irq` lives across the call
    // and `vcpu` is an open vCPU fd.
    let ret = unsafe { ioctl_with_ref(vcpu, KVM_INTERRUPT(), &irq) };
    if ret < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(())
    }
}

// kvm-ioctls wraps KVM_GET_DEVICE_ATTR for device fds only, not for a vCPU's attributes.
ioctl_iow_nr!(
    KVM_GET_DEVICE_ATTR,
    KVMIO,
    0xe2,
    kvm_bindings::kvm_device_attr
);

/// The vCPU's TSC offset (KVM_VCPU_TSC_OFFSET, Linux 5.16+): its guest TSC is the host TSC
/// plus this, wrapping, while KVM applies no TSC scaling (irqbench never sets KVM_SET_TSC_KHZ).
pub fn tsc_offset(vcpu: &VcpuFd) -> std::io::Result<u64> {
    let mut offset = 0u64;
    let attr = kvm_bindings::kvm_device_attr {
        flags: 0,
        group: kvm_bindings::KVM_VCPU_TSC_CTRL,
        attr: u64::from(kvm_bindings::KVM_VCPU_TSC_OFFSET),
        addr: &mut offset as *mut u64 as u64,
    };
    // SAFETY: KVM_GET_DEVICE_ATTR reads `attr` and writes 8 bytes at `addr`, which points to
    // `offset`; both live across the call and `vcpu` is an open vCPU fd.
    let ret = unsafe { ioctl_with_ref(vcpu, KVM_GET_DEVICE_ATTR(), &attr) };
    if ret < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(offset)
    }
}

/// The host's TSC now.
pub fn host_tsc() -> u64 {
    // SAFETY: rdtsc has no preconditions on x86_64.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// KVM_GET_SUPPORTED_CPUID of `kvm`'s device, asked once per device (by its device number) for
/// the process: the answer is the module's and does not change while it is loaded (but for the
/// APIC ID of the CPU the ioctl ran on, in leaf 1 EBX[31:24] and leaves 0xB/0x1F EDX, which
/// `machine` replaces with each vCPU's), and KVM builds it with a host `cpuid` per leaf, each
/// an exit to the outer hypervisor on a nested host
/// (~0.4 ms of CPU a call on a nested PVM host; the manifest, the flavour check, the PMU check and
/// every VM ask for it).
pub fn supported_cpuid(kvm: &Kvm) -> Result<CpuId, kvm_ioctls::Error> {
    static ASKED: OnceLock<Mutex<HashMap<u64, CpuId>>> = OnceLock::new();
    let device = device_number(kvm);
    let asked = ASKED.get_or_init(Mutex::default);
    if let Some(cpuid) = device.and_then(|d| {
        let known = asked.lock().unwrap_or_else(PoisonError::into_inner);
        known.get(&d).cloned()
    }) {
        return Ok(cpuid);
    }
    let cpuid = kvm.get_supported_cpuid(KVM_MAX_CPUID_ENTRIES)?;
    if let Some(d) = device {
        let mut known = asked.lock().unwrap_or_else(PoisonError::into_inner);
        known.insert(d, cpuid.clone());
    }
    Ok(cpuid)
}

/// The device number (`st_rdev`) of the character device `kvm` has open, if fstat says.
fn device_number(kvm: &Kvm) -> Option<u64> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: fstat writes a `stat` into the pointer on success; the fd is `kvm`'s, open for
    // the call, and the struct is read only when it succeeded.
    let ok = unsafe { libc::fstat(kvm.as_raw_fd(), st.as_mut_ptr()) } == 0;
    // SAFETY: fstat succeeded, so it initialized the struct.
    let st = ok.then(|| unsafe { st.assume_init() })?;
    (st.st_mode & libc::S_IFMT == libc::S_IFCHR).then_some(st.st_rdev)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The entries without the APIC ID of the CPU the ioctl ran on (KVM passes the host's
    /// through; the VMM sets each vCPU's own).
    fn without_apic_ids(cpuid: &CpuId) -> Vec<kvm_bindings::kvm_cpuid_entry2> {
        let mut entries = cpuid.as_slice().to_vec();
        for e in &mut entries {
            match e.function {
                1 => e.ebx &= 0x00FF_FFFF,
                0xB | 0x1F => e.edx = 0,
                _ => {}
            }
        }
        entries
    }

    /// The TSC offset KVM reports maps the host TSC to the guest's: a KVM_GET_MSRS of the guest
    /// TSC lands between the host TSC read before it and after it, plus the offset.
    #[test]
    fn the_tsc_offset_maps_the_host_tsc_to_the_guests() {
        let Some(kvm) = crate::host::test_kvm() else {
            return;
        };
        let vm = kvm.create_vm().expect("vm");
        let vcpu = vm.create_vcpu(0).expect("vcpu");
        let offset = tsc_offset(&vcpu).expect("KVM_VCPU_TSC_OFFSET");
        let entry = kvm_bindings::kvm_msr_entry {
            index: MSR_IA32_TSC,
            ..Default::default()
        };
        let mut msrs = kvm_bindings::Msrs::from_entries(&[entry]).expect("msrs");
        let before = host_tsc().wrapping_add(offset);
        assert_eq!(vcpu.get_msrs(&mut msrs).expect("KVM_GET_MSRS"), 1);
        let after = host_tsc().wrapping_add(offset);
        let guest = msrs.as_slice()[0].data;
        println!(
            "offset {offset:#x}: guest TSC {guest} in [{before}, {after}] ({} cycles)",
            after.wrapping_sub(before)
        );
        assert!(
            guest.wrapping_sub(before) <= after.wrapping_sub(before),
            "guest TSC {guest} outside [{before}, {after}]"
        );
    }

    /// The cached answer is the device's: equal to a fresh KVM_GET_SUPPORTED_CPUID, entry by
    /// entry but for the calling CPU's APIC ID, on a second handle of the same device.
    #[test]
    fn the_cached_supported_cpuid_is_the_devices() {
        let Some(kvm) = crate::host::test_kvm() else {
            return;
        };
        let first = supported_cpuid(&kvm).expect("cpuid");
        let other = crate::host::test_kvm().expect("a second handle of the device");
        let cached = supported_cpuid(&other).expect("cpuid");
        let fresh = other
            .get_supported_cpuid(KVM_MAX_CPUID_ENTRIES)
            .expect("cpuid");
        assert!(device_number(&kvm).is_some());
        assert_eq!(
            cached.as_slice(),
            first.as_slice(),
            "asked again, not cached"
        );
        assert_eq!(without_apic_ids(&cached), without_apic_ids(&fresh));
    }
}

/// MSR_IA32_TSC: KVM_GET_MSRS of it returns the guest TSC KVM keeps for the vCPU
/// (`kvm_get_msr_common` → `kvm_read_l1_tsc`, the value the guest's `rdtsc` would read).
pub const MSR_IA32_TSC: u32 = 0x10;

/// A vCPU's guest TSC and the host instant it stood for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TscReading {
    /// CLOCK_MONOTONIC at the middle of the ioctl.
    pub at: Instant,
    pub tsc: u64,
    /// How long the ioctl took: the reading lies somewhere inside it.
    pub bracket: Duration,
}

/// Readings of which [`read_guest_tsc`] keeps the one with the tightest bracket.
const TSC_READS: usize = 3;
/// A reading whose ioctl took longer than this (the thread was preempted) is taken again, up
/// to 8 in all; callers leave out readings still above it.
pub const TSC_READ_MAX: Duration = Duration::from_micros(100);

/// The guest TSC of `vcpu` (not running: KVM_GET_MSRS waits for a KVM_RUN to end) through
/// KVM_GET_MSRS: the tightest-bracketed of [`TSC_READS`] readings (the first ioctl after a
/// pause is the slowest), up to 8 while every bracket is above [`TSC_READ_MAX`].
pub fn read_guest_tsc(vcpu: &VcpuFd) -> std::io::Result<TscReading> {
    let entry = kvm_bindings::kvm_msr_entry {
        index: MSR_IA32_TSC,
        ..Default::default()
    };
    let mut best: Option<TscReading> = None;
    for i in 0..8 {
        let mut msrs = kvm_bindings::Msrs::from_entries(&[entry])
            .map_err(|e| std::io::Error::other(format!("{e:?}")))?;
        let before = Instant::now();
        let n = vcpu.get_msrs(&mut msrs).map_err(std::io::Error::from)?;
        let took = before.elapsed();
        if n != 1 {
            return Err(std::io::Error::other("KVM_GET_MSRS read no IA32_TSC"));
        }
        if best.is_none_or(|b| took < b.bracket) {
            best = Some(TscReading {
                at: before + took / 2,
                tsc: msrs.as_slice()[0].data,
                bracket: took,
            });
        }
        if i + 1 >= TSC_READS && best.is_some_and(|b| b.bracket <= TSC_READ_MAX) {
            break;
        }
    }
    best.ok_or_else(|| std::io::Error::other("no KVM_GET_MSRS reading"))
}

/// vCPU b − vCPU a TSC at one instant, in cycles: the difference of two readings less the
/// host time between them (signed: they may be taken in either order) at `khz`.
pub fn tsc_skew_cycles(a: &TscReading, b: &TscReading, khz: u64) -> i64 {
    let between_ns = if b.at >= a.at {
        b.at.duration_since(a.at).as_nanos() as f64
    } else {
        -(a.at.duration_since(b.at).as_nanos() as f64)
    };
    let between = between_ns * khz as f64 / 1e6;
    (b.tsc.wrapping_sub(a.tsc) as i64 as f64 - between) as i64
}
