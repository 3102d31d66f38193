//! What kvm-ioctls lacks: the binary statistics fd ([`stats`]) and KVM_INTERRUPT. Both are
//! thin, documented wrappers over the KVM API, kept apart so they could move upstream.

use kvm_bindings::{kvm_interrupt, KVMIO};
use kvm_ioctls::VcpuFd;
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
