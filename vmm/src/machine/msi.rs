//! MSIs through irqfd, the way vhost and VFIO devices interrupt a guest: one eventfd per vCPU,
//! bound with KVM_IRQFD to a GSI that KVM_SET_GSI_ROUTING routes as an MSI to that vCPU's APIC.
//! A write to the eventfd raises the MSI inside KVM; the VMM's vCPU loop never sees it.
//!
//! KVM API (Documentation/virt/kvm/api.rst): KVM_IRQFD needs an in-kernel irqchip (x86
//! `kvm_arch_irqfd_allowed`), and KVM_SET_GSI_ROUTING replaces the whole table, so the
//! PIC/IOAPIC routes KVM_CREATE_IRQCHIP set up go (the guest uses neither).

use irqbench_abi as abi;
use kvm_bindings::{
    kvm_irq_routing_entry, kvm_irq_routing_entry__bindgen_ty_1, kvm_irq_routing_msi, KvmIrqRouting,
    KVM_IRQ_ROUTING_MSI,
};
use kvm_ioctls::VmFd;
use vmm_sys_util::eventfd::{EventFd, EFD_CLOEXEC, EFD_NONBLOCK};

/// The first GSI of the MSI routes: above the 24 IOAPIC pins, as a VMM with an IOAPIC would
/// number them (KVM only needs it below KVM_MAX_IRQ_ROUTES).
const FIRST_GSI: u32 = 24;

#[derive(Debug, thiserror::Error)]
pub enum MsiError {
    #[error("creating the eventfd of vCPU {index}'s MSI failed")]
    EventFd {
        index: u32,
        #[source]
        source: std::io::Error,
    },
    #[error("building the GSI routing table of {vcpus} MSI routes failed: {why}")]
    Table { vcpus: u32, why: String },
    #[error(
        "KVM_SET_GSI_ROUTING with {vcpus} MSI routes failed (the msi source needs \
         KVM_CAP_IRQ_ROUTING and an in-kernel irqchip)"
    )]
    SetRouting {
        vcpus: u32,
        #[source]
        source: kvm_ioctls::Error,
    },
    #[error(
        "KVM_IRQFD for vCPU {index}'s MSI (GSI {gsi}) failed (the msi source needs KVM_CAP_IRQFD \
         and an in-kernel irqchip)"
    )]
    RegisterIrqfd {
        index: u32,
        gsi: u32,
        #[source]
        source: kvm_ioctls::Error,
    },
}

/// The MSI message that reaches APIC id `apic_id` with `vector` (Intel SDM vol. 3A, "Message
/// Signalled Interrupts"): address 0xFEE00000 | destination << 12, physical destination mode,
/// no redirection hint; data = the vector, fixed delivery, edge-triggered.
pub fn msi_message(apic_id: u32, vector: u8) -> kvm_irq_routing_msi {
    kvm_irq_routing_msi {
        address_lo: abi::LAPIC_GPA as u32 | ((apic_id & 0xFF) << 12),
        address_hi: 0,
        data: u32::from(vector),
        ..Default::default()
    }
}

/// The routing table: GSI `FIRST_GSI + i` is an MSI of `vector` to vCPU i's APIC (its APIC
/// id is its index: `machine::vcpu_cpuid`, and KVM's default xAPIC id is the vCPU id).
fn routes(vcpus: u32, vector: u8) -> Result<KvmIrqRouting, MsiError> {
    let entries: Vec<kvm_irq_routing_entry> = (0..vcpus)
        .map(|i| kvm_irq_routing_entry {
            gsi: FIRST_GSI + i,
            type_: KVM_IRQ_ROUTING_MSI,
            u: kvm_irq_routing_entry__bindgen_ty_1 {
                msi: msi_message(i, vector),
            },
            ..Default::default()
        })
        .collect();
    KvmIrqRouting::from_entries(&entries).map_err(|e| MsiError::Table {
        vcpus,
        why: format!("{e:?}"),
    })
}

/// Routes an MSI of `vector` to each of `vcpus` vCPUs and binds an eventfd to each: writing
/// the i-th raises vCPU i's MSI. The VM must have an in-kernel irqchip.
pub fn route_msis(vm: &VmFd, vcpus: u32, vector: u8) -> Result<Vec<EventFd>, MsiError> {
    vm.set_gsi_routing(&routes(vcpus, vector)?)
        .map_err(|source| MsiError::SetRouting { vcpus, source })?;
    (0..vcpus)
        .map(|index| {
            let fd = EventFd::new(EFD_NONBLOCK | EFD_CLOEXEC)
                .map_err(|source| MsiError::EventFd { index, source })?;
            let gsi = FIRST_GSI + index;
            vm.register_irqfd(&fd, gsi)
                .map_err(|source| MsiError::RegisterIrqfd { index, gsi, source })?;
            Ok(fd)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_vcpu_gets_a_fixed_edge_msi_to_its_own_apic() {
        let m = msi_message(3, 0x42);
        assert_eq!(m.address_lo, 0xFEE0_3000);
        assert_eq!(m.address_hi, 0);
        // Delivery mode (bits 8-10) fixed, trigger (bit 15) edge: only the vector is set.
        assert_eq!(m.data, 0x42);
        let table = routes(2, 0x42).expect("table");
        let entries = table.as_slice();
        assert_eq!(entries.len(), 2);
        assert_eq!(
            (entries[1].gsi, entries[1].type_),
            (FIRST_GSI + 1, KVM_IRQ_ROUTING_MSI)
        );
        // SAFETY: the entry was built with its `msi` member, the one KVM_IRQ_ROUTING_MSI reads.
        let msi = unsafe { entries[1].u.msi };
        assert_eq!(msi.address_lo, 0xFEE0_1000);
    }

    /// A VM without an in-kernel irqchip refuses the routes, with a reason, not a panic.
    #[test]
    fn a_userspace_irqchip_vm_refuses_msi_routes() {
        let Some(kvm) = crate::host::test_kvm() else {
            return;
        };
        let vm = kvm.create_vm().expect("vm");
        let err = route_msis(&vm, 1, 0x42).expect_err("no irqchip");
        assert!(err.to_string().contains("in-kernel irqchip"), "{err}");
    }
}
