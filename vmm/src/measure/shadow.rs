//! Interrupt-window exits under the STI shadow.
//!
//! `sti` enables interrupts only after the instruction that follows it (Intel SDM, STI: "the
//! processor responds to interrupts after executing the next instruction"). KVM's interrupt
//! window honours that: VMX and SVM report the vCPU ready for injection only when IF=1 and no
//! STI/MOV-SS blocking is in force (arch/x86/kvm/vmx/vmx.c `vmx_interrupt_blocked`,
//! svm/svm.c `svm_interrupt_blocked`). So the window exit of a `sti` lands one instruction
//! late — after `sti; dec` in a measured loop, at the next copy's first instruction, or after
//! `sti; ret`, in the caller — at a RIP that names some other code. This module finds, by
//! decoding the guest image backwards from the exit RIP, the `sti` an exit belongs to.

use iced_x86::{Code, Decoder, DecoderOptions, FlowControl, Instruction, Mnemonic, OpKind};

use crate::machine::image::GuestImage;

/// How the `sti` at `sti` put the window exit where it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shadow {
    /// The exit RIP is the instruction right after the `sti`.
    AfterSti,
    /// `sti` and one more instruction (which ended in the exit RIP, by falling through or
    /// jumping there) ran before the window opened.
    AfterNext,
    /// The function ended with `sti; ret`: the window opened at the return address.
    AfterRet,
}

/// The `sti` whose shadow explains an interrupt-window exit at `rip`, and how. `row_op` is the
/// operation the row's loop calls through a register (`call *%rbx`): the only callee a
/// register-indirect call can have in a row's own code.
pub fn sti_before(image: &GuestImage, rip: u64, row_op: Option<u64>) -> Option<(u64, Shadow)> {
    let insns = decode_before(image, rip)?;
    let (prev, rest) = insns.split_last()?;
    if prev.mnemonic() == Mnemonic::Sti {
        return Some((prev.ip(), Shadow::AfterSti));
    }
    if prev.flow_control() == FlowControl::Next {
        if let Some(sti) = rest.last().filter(|i| i.mnemonic() == Mnemonic::Sti) {
            return Some((sti.ip(), Shadow::AfterNext));
        }
    }
    if let Some(sti) = jump_from_shadow(&insns, rip) {
        return Some((sti, Shadow::AfterNext));
    }
    if matches!(
        prev.flow_control(),
        FlowControl::Call | FlowControl::IndirectCall
    ) {
        let callee = callee(image, prev, row_op)?;
        return sti_before_ret(image, callee).map(|sti| (sti, Shadow::AfterRet));
    }
    None
}

/// The instructions from the start of the code `rip` follows (the symbol that holds `rip - 1`,
/// or the one before it when that leaves fewer than two) up to `rip`; `None` when `rip` is not
/// an instruction boundary of that code.
fn decode_before(image: &GuestImage, rip: u64) -> Option<Vec<Instruction>> {
    let (sym, _) = image.symbols.lookup(rip.checked_sub(1)?)?;
    let mut insns = decode_range(image, sym.addr, rip)?;
    if insns.len() < 2 {
        if let Some((before, _)) = image.symbols.lookup(sym.addr.checked_sub(1)?) {
            if let Some(wider) = decode_range(image, before.addr, rip) {
                insns = wider;
            }
        }
    }
    Some(insns)
}

/// Every instruction in `start..end`, if they tile it exactly.
fn decode_range(image: &GuestImage, start: u64, end: u64) -> Option<Vec<Instruction>> {
    let code = image.code_bytes(start, end.checked_sub(start)?)?;
    let mut decoder = Decoder::with_ip(64, code, start, DecoderOptions::NONE);
    let mut out = Vec::new();
    while decoder.can_decode() {
        let insn = decoder.decode();
        if insn.is_invalid() {
            return None;
        }
        out.push(insn);
    }
    (out.last()?.next_ip() == end).then_some(out)
}

/// A direct jump to `target` right after a `sti` (`sti; jmp 7f`), among `insns`.
fn jump_from_shadow(insns: &[Instruction], target: u64) -> Option<u64> {
    insns.windows(2).find_map(|pair| {
        let (sti, jump) = (&pair[0], &pair[1]);
        let direct = matches!(
            jump.flow_control(),
            FlowControl::UnconditionalBranch | FlowControl::ConditionalBranch
        ) && jump.op0_kind() == OpKind::NearBranch64;
        (sti.mnemonic() == Mnemonic::Sti && direct && jump.near_branch_target() == target)
            .then(|| sti.ip())
    })
}

/// Where `call` goes: its direct target, the pointer a RIP-relative memory operand holds in the
/// image (the pv-ops table), or `row_op` for a register-indirect call.
fn callee(image: &GuestImage, call: &Instruction, row_op: Option<u64>) -> Option<u64> {
    match call.op0_kind() {
        OpKind::NearBranch64 => Some(call.near_branch_target()),
        OpKind::Memory if call.is_ip_rel_memory_operand() => {
            let bytes = image.code_bytes(call.ip_rel_memory_address(), 8)?;
            Some(u64::from_le_bytes(bytes.try_into().ok()?))
        }
        OpKind::Register if call.code() == Code::Call_rm64 => row_op,
        _ => None,
    }
}

/// The `sti` right before a `ret` of the function at `addr`, if it has one. Several labels may
/// start there (a strategy without a save starts with its `_disable` site): each is tried as
/// the function's name, up to its `<name>_end` label or the next symbol.
fn sti_before_ret(image: &GuestImage, addr: u64) -> Option<u64> {
    image
        .symbols
        .iter()
        .filter(|s| s.addr == addr)
        .filter_map(|s| image.function_code(&s.name))
        .find_map(|(start, code)| {
            let insns: Vec<Instruction> = Decoder::with_ip(64, code, start, DecoderOptions::NONE)
                .iter()
                .collect();
            insns.windows(2).find_map(|pair| {
                (pair[0].mnemonic() == Mnemonic::Sti && pair[1].mnemonic() == Mnemonic::Ret)
                    .then(|| pair[0].ip())
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image() -> GuestImage {
        GuestImage::embedded().expect("embedded guest")
    }

    fn insns_of(image: &GuestImage, sym: &str) -> Vec<Instruction> {
        let (addr, code) = image.function_code(sym).expect(sym);
        Decoder::with_ip(64, code, addr, DecoderOptions::NONE)
            .iter()
            .collect()
    }

    fn first(insns: &[Instruction], m: Mnemonic) -> Instruction {
        *insns
            .iter()
            .find(|i| i.mnemonic() == m)
            .unwrap_or_else(|| panic!("no {m:?}"))
    }

    #[test]
    fn an_exit_right_after_sti_belongs_to_that_sti() {
        let image = image();
        let insns = insns_of(&image, "irqbench_op_native_cli_sti");
        let sti = first(&insns, Mnemonic::Sti);
        assert_eq!(
            sti_before(&image, sti.next_ip(), None),
            Some((sti.ip(), Shadow::AfterSti))
        );
        // popf opens the window at once (no shadow): nothing to re-attribute.
        let popf = first(
            &insns_of(&image, "irqbench_op_native_popf"),
            Mnemonic::Popfq,
        );
        assert_eq!(sti_before(&image, popf.next_ip(), None), None);
    }

    /// `sti; ret`: the window opens at the return address, in the loop that called the op
    /// through a register (the lock loop calls its lock op so).
    #[test]
    fn after_sti_ret_the_exit_in_the_caller_belongs_to_the_callees_sti() {
        let image = image();
        let cli_sti = image.symbols.address("irqbench_lockop_native_cli_sti");
        let sti = first(
            &insns_of(&image, "irqbench_lockop_native_cli_sti"),
            Mnemonic::Sti,
        );
        let lock_loop = insns_of(&image, "irqbench_lock_loop");
        let call = first(&lock_loop, Mnemonic::Call);
        assert_eq!(
            sti_before(&image, call.next_ip(), cli_sti),
            Some((sti.ip(), Shadow::AfterRet))
        );
        // The same RIP in a native-popf row: its op has no sti.
        let popf = image.symbols.address("irqbench_lockop_native_popf");
        assert_eq!(sti_before(&image, call.next_ip(), popf), None);
        // Through the pv-ops table: pvop-skip's restore calls irq_enable (`sti; ret`).
        let enable = first(&insns_of(&image, "irqbench_pv_irq_enable"), Mnemonic::Sti);
        let restore = insns_of(&image, "irqbench_op_pvop_skip");
        let pv_call = restore
            .iter()
            .rfind(|i| i.mnemonic() == Mnemonic::Call)
            .expect("restore's call");
        assert_eq!(
            sti_before(&image, pv_call.next_ip(), None),
            Some((enable.ip(), Shadow::AfterRet))
        );
    }

    /// The nested loop's outer enable is `sti; dec; jnz`: the exit lands at the `jnz`, one
    /// instruction after the `sti`.
    #[test]
    fn after_sti_and_one_more_the_exit_belongs_to_the_sti() {
        let image = image();
        let nested = insns_of(&image, "irqbench_strategy_loop_n_native_popf");
        let (sti, jnz) = nested
            .windows(3)
            .find(|w| w[0].mnemonic() == Mnemonic::Sti && w[2].mnemonic() == Mnemonic::Jne)
            .map(|w| (w[0], w[2]))
            .expect("sti; dec; jnz");
        assert_eq!(
            sti_before(&image, jnz.ip(), None),
            Some((sti.ip(), Shadow::AfterNext))
        );
    }

    /// `sti; jmp target`: the exit lands at the jump's target.
    #[test]
    fn after_sti_jmp_the_exit_at_the_target_belongs_to_the_sti() {
        // sti; jmp +2; nop; nop  (at 0x1000: the target is 0x1005)
        let code = [0xFB, 0xEB, 0x02, 0x90, 0x90, 0x90];
        let insns: Vec<Instruction> = Decoder::with_ip(64, &code, 0x1000, DecoderOptions::NONE)
            .iter()
            .collect();
        assert_eq!(jump_from_shadow(&insns, 0x1005), Some(0x1000));
        assert_eq!(jump_from_shadow(&insns, 0x1004), None);
    }
}
