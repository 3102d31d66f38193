//! x86 decoding with iced-x86: the instruction at a faulting RIP and a strategy's exact code.
//! The tests check that the guest contains no SSE/AVX (which PVM hosts cannot emulate at CPL0).

use iced_x86::{Decoder, DecoderOptions, Formatter, GasFormatter, Instruction, Mnemonic};

/// One decoded instruction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodedInsn {
    pub addr: u64,
    pub bytes: Vec<u8>,
    pub text: String,
    pub mnemonic: Mnemonic,
    pub invalid: bool,
}

fn format(insn: &Instruction) -> String {
    let mut formatter = GasFormatter::new();
    let options = formatter.options_mut();
    options.set_first_operand_char_index(8);
    options.set_uppercase_hex(false);
    options.set_branch_leading_zeros(false);
    let mut out = String::new();
    formatter.format(insn, &mut out);
    out
}

/// Decodes `code` (loaded at `addr`) and keeps the instructions `keep` accepts.
fn decode_filtered(
    code: &[u8],
    addr: u64,
    mut keep: impl FnMut(&Instruction) -> bool,
) -> Vec<DecodedInsn> {
    let mut decoder = Decoder::with_ip(64, code, addr, DecoderOptions::NONE);
    let mut out = Vec::new();
    let mut insn = Instruction::default();
    while decoder.can_decode() {
        decoder.decode_out(&mut insn);
        if !keep(&insn) {
            continue;
        }
        let start = (insn.ip() - addr) as usize;
        out.push(DecodedInsn {
            addr: insn.ip(),
            bytes: code
                .get(start..start + insn.len())
                .unwrap_or_default()
                .to_vec(),
            text: format(&insn),
            mnemonic: insn.mnemonic(),
            invalid: insn.is_invalid(),
        });
    }
    out
}

/// Decodes every instruction in `code`, which is loaded at `addr`.
pub fn decode_all(code: &[u8], addr: u64) -> Vec<DecodedInsn> {
    decode_filtered(code, addr, |_| true)
}

/// The first instruction of `code` as text (`(bad)` for undecodable bytes).
pub fn decode_one(code: &[u8], addr: u64) -> String {
    match decode_all(code, addr).first() {
        Some(i) if !i.invalid => i.text.clone(),
        Some(i) => format!("(bad) {}", hex(&i.bytes)),
        None => "(no bytes)".into(),
    }
}

pub fn hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::plan::StrategyId;
    use crate::machine::image::GuestImage;
    use iced_x86::CpuidFeature;
    use irqbench_abi::strategy::FlagOps;

    /// Fences are encoded as SSE2 instructions but are not SIMD: PVM emulates them.
    fn is_fence(m: Mnemonic) -> bool {
        matches!(m, Mnemonic::Lfence | Mnemonic::Mfence | Mnemonic::Sfence)
    }

    /// Every SSE/AVX (or other SIMD) instruction in `code`, with address and text.
    pub fn find_simd(code: &[u8], addr: u64) -> Vec<DecodedInsn> {
        decode_filtered(code, addr, |insn| {
            if insn.is_invalid() || is_fence(insn.mnemonic()) {
                return false;
            }
            insn.cpuid_features().iter().any(|f| {
                let name = format!("{f:?}");
                name.starts_with("SSE")
                    || name.starts_with("AVX")
                    || name.starts_with("FMA")
                    || name.starts_with("F16C")
                    || name.starts_with("MMX")
                    || name.starts_with("SSSE")
                    || *f == CpuidFeature::FXSR
            }) || (0..insn.op_count()).any(|i| {
                let r = insn.op_register(i);
                r.is_xmm() || r.is_ymm() || r.is_zmm()
            })
        })
    }

    /// Every executable segment's bytes with its load address.
    fn executable_ranges(image: &GuestImage) -> Vec<(u64, &[u8])> {
        image
            .segments
            .iter()
            .filter(|s| s.executable)
            .filter_map(|s| {
                let start = s.file_offset as usize;
                Some((
                    s.paddr,
                    image.bytes.get(start..start + s.file_size as usize)?,
                ))
            })
            .collect()
    }

    #[test]
    fn decodes_known_bytes() {
        // pushf; pop %rax; cli; push %rax; popf; ret
        let code = [0x9c, 0x58, 0xfa, 0x50, 0x9d, 0xc3];
        let insns = decode_all(&code, 0x1000);
        let m: Vec<Mnemonic> = insns.iter().map(|i| i.mnemonic).collect();
        assert_eq!(
            m,
            [
                Mnemonic::Pushfq,
                Mnemonic::Pop,
                Mnemonic::Cli,
                Mnemonic::Push,
                Mnemonic::Popfq,
                Mnemonic::Ret
            ]
        );
        assert_eq!(decode_one(&[0x0f, 0x0b], 0), "ud2");
    }

    #[test]
    fn simd_detector_flags_sse_and_spares_fences() {
        // xorps %xmm0,%xmm0 ; lfence ; vmovdqa %ymm0,%ymm1 ; nop
        let code = [
            0x0f, 0x57, 0xc0, 0x0f, 0xae, 0xe8, 0xc5, 0xfd, 0x6f, 0xc8, 0x90,
        ];
        let found: Vec<Mnemonic> = find_simd(&code, 0).iter().map(|i| i.mnemonic).collect();
        assert_eq!(found, [Mnemonic::Xorps, Mnemonic::Vmovdqa]);
    }

    /// The hosts we build on cannot emulate SSE at CPL0: the built guest must contain none.
    #[test]
    fn built_guest_has_no_sse_or_avx() {
        let image = GuestImage::embedded().expect("embedded guest");
        let ranges = executable_ranges(&image);
        assert!(!ranges.is_empty());
        let mut total = 0;
        for (addr, code) in ranges {
            total += decode_all(code, addr).len();
            let simd = find_simd(code, addr);
            assert!(
                simd.is_empty(),
                "SSE/AVX in the guest: {}",
                simd.iter()
                    .map(|i| format!("{:#x}: {}", i.addr, i.text))
                    .collect::<Vec<_>>()
                    .join("; ")
            );
        }
        assert!(total > 200, "decoded only {total} instructions");
    }

    /// Flag-relevant instructions of one strategy's operation, as counts (its body included).
    fn flag_ops(image: &GuestImage, strategy: StrategyId) -> FlagOps {
        let sym = strategy.symbol();
        let (addr, code) = image.function_code(&sym).expect("strategy symbol");
        let hypercall = image.symbols.address("irqbench_hypercall").expect("stub");
        let mut decoder = Decoder::with_ip(64, code, addr, DecoderOptions::NONE);
        let mut ops = FlagOps::NONE;
        let mut insn = Instruction::default();
        while decoder.can_decode() {
            decoder.decode_out(&mut insn);
            match insn.mnemonic() {
                Mnemonic::Cli => ops.cli += 1,
                Mnemonic::Sti => ops.sti += 1,
                Mnemonic::Pushfq => ops.pushf += 1,
                Mnemonic::Popfq => ops.popf += 1,
                Mnemonic::Call if insn.op0_kind() == iced_x86::OpKind::Memory => {
                    ops.indirect_calls += 1
                }
                Mnemonic::Call if insn.near_branch_target() == hypercall => {
                    ops.hypercall_calls += 1
                }
                Mnemonic::Test if insn.immediate32() == 0x200 => ops.test_if_bit += 1,
                Mnemonic::Mov
                    if insn.segment_prefix() == iced_x86::Register::GS
                        && insn.op0_kind() == iced_x86::OpKind::Memory
                        && insn.memory_displacement64()
                            == irqbench_abi::offset::SLOT_VIF_MASK as u64 =>
                {
                    ops.vif_mask_writes += 1
                }
                _ => {}
            }
            if insn.is_jcc_short_or_near() {
                ops.cond_branches += 1;
            }
        }
        ops
    }

    /// Every strategy contains exactly the flag instructions its entry in
    /// `abi::strategy::STRATEGIES` names. The body's loop adds one `jz` and one `jnz` to every
    /// strategy's branch count.
    #[test]
    fn each_strategy_decodes_to_exactly_its_definition() {
        let image = GuestImage::embedded().expect("embedded guest");
        let body_branches = 2;
        for s in StrategyId::all() {
            let info = s.info().expect("an id from the table");
            let want = FlagOps {
                cond_branches: info.flags.cond_branches + body_branches,
                ..info.flags
            };
            assert_eq!(flag_ops(&image, s), want, "{}", info.name);
        }
        // The pv-ops the indirect calls reach: save_fl is pushf, restore_fl popf, enable sti.
        for (sym, mnemonic) in [
            ("irqbench_pv_save_fl", Mnemonic::Pushfq),
            ("irqbench_pv_restore_fl", Mnemonic::Popfq),
            ("irqbench_pv_irq_disable", Mnemonic::Cli),
            ("irqbench_pv_irq_enable", Mnemonic::Sti),
        ] {
            let (addr, code) = image.function_code(sym).expect(sym);
            assert!(
                decode_all(code, addr)
                    .iter()
                    .any(|i| i.mnemonic == mnemonic),
                "{sym} lacks {mnemonic:?}"
            );
        }
    }

    /// The KVM hypercall transports execute the host vendor's instruction, chosen at run time:
    /// both stubs must hold exactly one `vmcall` (Intel) and one `vmmcall` (AMD) site.
    #[test]
    fn the_hypercall_stubs_hold_a_vmcall_and_a_vmmcall_site() {
        let image = GuestImage::embedded().expect("embedded guest");
        for sym in ["irqbench_hypercall", "irqbench_hypercall_outer"] {
            let (addr, code) = image.function_code(sym).expect(sym);
            let insns = decode_all(code, addr);
            let count = |m: Mnemonic| insns.iter().filter(|i| i.mnemonic == m).count();
            assert_eq!(count(Mnemonic::Vmcall), 1, "{sym}");
            assert_eq!(count(Mnemonic::Vmmcall), 1, "{sym}");
            assert_eq!(count(Mnemonic::Out), 1, "{sym}: the port transport");
        }
    }
}
