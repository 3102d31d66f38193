//! The reference guest: a few hundred bytes of hand-encoded x86-64 that run in the same mode as
//! irqbench's own guest (64-bit long mode, CPL0, paging on, IF set), so on an emulating host
//! (PVM) its instructions are emulated exactly as irqbench's are.
//!
//! The guest asks for its next block with `in eax, dx` on [`PORT`]; the host answers with the
//! entry address of the variant to run, having written the block's iteration count at
//! [`ITERATIONS_GPA`]. The block times its loop with `lfence; rdtsc; lfence` on both sides (the
//! fences irqbench's guest uses), stores the TSC delta at [`RESULT_GPA`] and asks again: one
//! port-I/O exit per block, outside the timed window.

/// The port the guest asks on (`in`) and rings in the exit variant (`out`).
pub const PORT: u16 = 0x3F0;
pub const GDT_GPA: u64 = 0x500;
pub const TSS_GPA: u64 = 0x800;
pub const PML4_GPA: u64 = 0x1000;
pub const PDPT_GPA: u64 = 0x2000;
pub const PD_GPA: u64 = 0x3000;
/// The stack and the data live in the second 2 MiB page, as irqbench's stacks live away from
/// its page tables: a shadow MMU write-protects the pages that hold page tables, and stores
/// near them (popf's pushes) measured 4× slower and ten times noisier on PVM.
pub const STACK_TOP: u64 = 0x40_0000;
/// The TSC cycles of the last block (u64), written by the guest.
pub const RESULT_GPA: u64 = 0x30_0000;
/// The iterations of the next block (u32), written by the host.
pub const ITERATIONS_GPA: u64 = 0x30_0008;
pub const CODE_GPA: u64 = 0x1_0000;
/// Guest RAM: two 2 MiB pages, identity-mapped.
pub const MEMORY_BYTES: usize = 4 << 20;

/// What one block's loop body is. The bodies are irqbench's strategies without their call and
/// ret (guest/src/ops.S `native_cli_sti` and `native_popf` with body 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Body {
    /// Nothing: the loop alone (`dec ecx; jnz`).
    Empty,
    /// `cli; sti`
    CliSti,
    /// `pushfq; pop rax; cli; push rax; popfq`
    Popf,
    /// `out dx, al` to [`PORT`]: one port-I/O exit round trip per iteration.
    PortOut,
}

impl Body {
    pub const ALL: [Body; 4] = [Body::Empty, Body::CliSti, Body::Popf, Body::PortOut];

    pub fn name(self) -> &'static str {
        match self {
            Body::Empty => "empty",
            Body::CliSti => "cli;sti",
            Body::Popf => "pushf;pop;cli;push;popf",
            Body::PortOut => "out (port-I/O exit)",
        }
    }

    fn bytes(self) -> &'static [u8] {
        match self {
            Body::Empty => &[],
            Body::CliSti => &[0xFA, 0xFB],
            Body::Popf => &[0x9C, 0x58, 0xFA, 0x50, 0x9D],
            Body::PortOut => &[0xEE],
        }
    }
}

/// The guest's code, loaded at [`CODE_GPA`], and each variant's entry address.
#[derive(Clone, Debug)]
pub struct Code {
    pub bytes: Vec<u8>,
    /// Entry address per [`Body::ALL`] index.
    pub entries: [u32; 4],
    /// `hlt`: the answer that ends the guest.
    pub halt: u32,
}

const LFENCE_RDTSC_LFENCE: [u8; 8] = [0x0F, 0xAE, 0xE8, 0x0F, 0x31, 0x0F, 0xAE, 0xE8];

/// `mov dx, PORT`
fn mov_dx_port() -> [u8; 4] {
    let p = PORT.to_le_bytes();
    [0x66, 0xBA, p[0], p[1]]
}

/// One variant: load the count, read the TSC, loop, read the TSC, store the delta, jump back.
fn block(out: &mut Vec<u8>, body: Body, ask: usize) {
    let iterations = (ITERATIONS_GPA as u32).to_le_bytes();
    // mov ecx, [ITERATIONS_GPA]
    out.extend([0x8B, 0x0C, 0x25]);
    out.extend(iterations);
    out.extend(LFENCE_RDTSC_LFENCE);
    out.extend([0x89, 0xC6, 0x89, 0xD7]); // mov esi, eax; mov edi, edx
    out.extend(mov_dx_port());
    let top = out.len();
    out.extend(body.bytes());
    out.extend([0xFF, 0xC9]); // dec ecx
    let back = top as isize - (out.len() + 2) as isize;
    out.extend([0x75, back as i8 as u8]); // jnz top
    out.extend(LFENCE_RDTSC_LFENCE);
    out.extend([0x48, 0xC1, 0xE2, 0x20]); // shl rdx, 32
    out.extend([0x48, 0x09, 0xD0]); // or rax, rdx
    out.extend([0x48, 0xC1, 0xE7, 0x20]); // shl rdi, 32
    out.extend([0x48, 0x09, 0xFE]); // or rsi, rdi
    out.extend([0x48, 0x29, 0xF0]); // sub rax, rsi
    out.extend([0x48, 0x89, 0x04, 0x25]); // mov [RESULT_GPA], rax
    out.extend((RESULT_GPA as u32).to_le_bytes());
    let rel = ask as isize - (out.len() + 5) as isize;
    out.push(0xE9); // jmp ask
    out.extend((rel as i32).to_le_bytes());
}

/// The whole guest: `ask: mov dx, PORT; in eax, dx; jmp rax`, the halt, then every variant.
pub fn code() -> Code {
    let mut bytes = Vec::with_capacity(512);
    let ask = bytes.len();
    bytes.extend(mov_dx_port());
    bytes.extend([0xED, 0xFF, 0xE0]); // in eax, dx; jmp rax
    let halt = bytes.len();
    bytes.extend([0xF4, 0xEB, 0xFD]); // hlt; jmp hlt
    let mut entries = [0u32; 4];
    for (entry, body) in entries.iter_mut().zip(Body::ALL) {
        *entry = (CODE_GPA as usize + bytes.len()) as u32;
        block(&mut bytes, body, ask);
    }
    Code {
        bytes,
        entries,
        halt: (CODE_GPA as usize + halt) as u32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iced_x86::{Decoder, DecoderOptions, Instruction, Mnemonic as M};

    fn decoded(code: &Code) -> Vec<Instruction> {
        let decoder = Decoder::with_ip(64, &code.bytes, CODE_GPA, DecoderOptions::NONE);
        decoder.into_iter().collect()
    }

    #[test]
    fn every_variant_decodes_to_the_loop_it_names() {
        let code = code();
        let all = decoded(&code);
        assert!(all.iter().all(|i| i.mnemonic() != M::INVALID));
        assert_eq!(
            all[..5]
                .iter()
                .map(Instruction::mnemonic)
                .collect::<Vec<_>>(),
            [M::Mov, M::In, M::Jmp, M::Hlt, M::Jmp]
        );
        for (body, entry) in Body::ALL.into_iter().zip(code.entries) {
            let from = all.iter().position(|i| i.ip() == u64::from(entry));
            let from = from.unwrap_or_else(|| panic!("{body:?} entry is not an instruction"));
            let insns = &all[from..];
            let jnz = insns
                .iter()
                .position(|i| i.mnemonic() == M::Jne)
                .expect("a jnz");
            let head: Vec<M> = insns[..7].iter().map(Instruction::mnemonic).collect();
            // mov ecx, [count]; lfence; rdtsc; lfence; mov esi, eax; mov edi, edx; mov dx, PORT
            assert_eq!(
                head,
                [
                    M::Mov,
                    M::Lfence,
                    M::Rdtsc,
                    M::Lfence,
                    M::Mov,
                    M::Mov,
                    M::Mov
                ]
            );
            assert_eq!(insns[0].memory_displacement64(), ITERATIONS_GPA);
            let body_insns: Vec<M> = insns[7..jnz - 1]
                .iter()
                .map(Instruction::mnemonic)
                .collect();
            let expected: &[M] = match body {
                Body::Empty => &[],
                Body::CliSti => &[M::Cli, M::Sti],
                Body::Popf => &[M::Pushfq, M::Pop, M::Cli, M::Push, M::Popfq],
                Body::PortOut => &[M::Out],
            };
            assert_eq!(body_insns, expected, "{body:?}");
            assert_eq!(insns[jnz - 1].mnemonic(), M::Dec);
            // The loop branch lands on the body's first instruction (`dec` for the empty one).
            assert_eq!(insns[jnz].near_branch_target(), insns[7].ip());
            let jmp = insns
                .iter()
                .position(|i| i.mnemonic() == M::Jmp)
                .expect("a jmp");
            assert_eq!(insns[jmp - 1].memory_displacement64(), RESULT_GPA);
            assert_eq!(insns[jmp].near_branch_target(), CODE_GPA, "back to the ask");
        }
    }
}
