//! The guest kernel image: the ELF embedded at build time or given with `--guest FILE`.
//!
//! The image is validated here, before any vCPU exists, against what the guest memory map
//! (`irqbench_abi`) allows; loading itself is linux-loader's `Elf::load`. The symbol table is kept
//! so that exit RIPs can be attributed to strategies and sites, and code can be disassembled.

use std::io::Cursor;
use std::path::Path;

use irqbench_abi as abi;
use linux_loader::loader::{elf::Elf, KernelLoader};
use object::elf;
use object::read::elf::{FileHeader as _, ProgramHeader as _, Sym as _};
use object::LittleEndian;
use vm_memory::{GuestAddress, GuestMemoryMmap};

/// The guest this binary was built with (see vmm/build.rs).
pub static EMBEDDED_GUEST: &[u8] = include_bytes!(env!("IRQBENCH_GUEST_ELF"));

type Header = elf::FileHeader64<LittleEndian>;
type ProgramHeader = elf::ProgramHeader64<LittleEndian>;
const LE: LittleEndian = LittleEndian;

#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// A missing, oversized or non-regular file: the bounded read names the path and limit.
    #[error(transparent)]
    Read(#[from] crate::files::read::BoundedReadError),
    #[error(
        "guest image {} is not a valid guest kernel: {reason}",
        crate::text::outside(source_name)
    )]
    Invalid { source_name: String, reason: String },
    #[error(
        "loading guest image {} into guest memory failed",
        crate::text::outside(source_name)
    )]
    Load {
        source_name: String,
        #[source]
        source: linux_loader::loader::Error,
    },
}

/// One PT_LOAD segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    pub paddr: u64,
    pub file_offset: u64,
    pub file_size: u64,
    pub mem_size: u64,
    pub executable: bool,
}

/// A named address range from the ELF symbol table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Symbol {
    pub name: String,
    pub addr: u64,
    /// `st_size`: 0 for the guest's assembly labels, which carry no `.size`.
    pub size: u64,
}

impl Symbol {
    /// The guest marks where each function stops with a zero-size `<function>_end` label, which
    /// shares its address with whatever function follows.
    fn is_end_label(&self) -> bool {
        self.name.ends_with("_end")
    }

    fn spans(&self, rip: u64) -> bool {
        rip >= self.addr && rip - self.addr < self.size
    }
}

/// Symbols sorted by address; a RIP belongs to the closest symbol at or below it.
#[derive(Clone, Debug, Default)]
pub struct SymbolTable {
    symbols: Vec<Symbol>,
}

impl SymbolTable {
    pub fn address(&self, name: &str) -> Option<u64> {
        self.symbols.iter().find(|s| s.name == name).map(|s| s.addr)
    }

    /// The symbol containing `rip` (the nearest at or below it) and the offset into it; see
    /// [`SymbolTable::lookup_for`] for which of several symbols at one address wins.
    pub fn lookup(&self, rip: u64) -> Option<(&Symbol, u64)> {
        self.lookup_for(rip, |_| false)
    }

    /// Like [`SymbolTable::lookup`], preferring names for which `prefer` holds (a caller passes
    /// its phase's strategy) when several symbols share the nearest address. The `_end` label of
    /// one function and the start of the next share an address, so name order alone would credit
    /// an exit in the next function to the previous one. Ranking, best first: a sized symbol
    /// whose range holds `rip`; a preferred name; a name that is not an `_end` label; then the
    /// alphabetically last (the most specific site label, e.g. `<function>_disable`).
    pub fn lookup_for(&self, rip: u64, prefer: impl Fn(&str) -> bool) -> Option<(&Symbol, u64)> {
        let idx = self.symbols.partition_point(|s| s.addr <= rip);
        let nearest = self.symbols.get(idx.checked_sub(1)?)?.addr;
        let first = self.symbols.partition_point(|s| s.addr < nearest);
        let sym = self.symbols[first..idx]
            .iter()
            .max_by_key(|s| (s.spans(rip), prefer(&s.name), !s.is_end_label()))?;
        Some((sym, rip - sym.addr))
    }

    pub fn is_empty(&self) -> bool {
        self.symbols.is_empty()
    }

    /// The next symbol strictly above `addr` (a function's end when nothing follows).
    pub fn next_after(&self, addr: u64) -> Option<&Symbol> {
        let idx = self.symbols.partition_point(|s| s.addr <= addr);
        self.symbols.get(idx)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Symbol> {
        self.symbols.iter()
    }
}

/// A validated guest ELF.
#[derive(Debug)]
pub struct GuestImage {
    /// Where it came from: a path or `<embedded>`.
    pub source: String,
    pub bytes: Vec<u8>,
    pub entry: u64,
    pub segments: Vec<Segment>,
    pub symbols: SymbolTable,
}

impl GuestImage {
    pub fn embedded() -> Result<GuestImage, ImageError> {
        GuestImage::parse(EMBEDDED_GUEST.to_vec(), "<embedded>")
    }

    /// Reads at most [`crate::files::read::MAX_GUEST_BYTES`] from a regular file: `--guest
    /// /dev/zero` or a FIFO is refused instead of read until memory runs out.
    pub fn from_file(path: &Path) -> Result<GuestImage, ImageError> {
        let bytes = crate::files::read::read_bounded(
            path,
            crate::files::read::MAX_GUEST_BYTES,
            "guest image",
        )?;
        GuestImage::parse(bytes, &path.display().to_string())
    }

    /// Why exit attribution and `disasm` will not work with this image, if they will not: a
    /// stripped guest still boots and is measured, so this is a warning, not an error.
    pub fn symbol_warning(&self) -> Option<String> {
        self.symbols.is_empty().then(|| {
            format!(
                "guest image {} has no symbol table: exit sites cannot be attributed to \
                 strategies and disasm finds no functions (do not strip the guest)",
                crate::text::outside(&self.source)
            )
        })
    }

    /// Validates the ELF against the guest memory map. Every check names what it found and what
    /// would be valid, so a user with a hand-built guest knows what to fix.
    pub fn parse(bytes: Vec<u8>, source: &str) -> Result<GuestImage, ImageError> {
        let invalid = |reason: String| ImageError::Invalid {
            source_name: source.to_string(),
            reason,
        };
        let header = check_header(&bytes).map_err(invalid)?;
        let entry = header.e_entry(LE);
        let segments = check_segments(header, &bytes).map_err(invalid)?;
        if !segments
            .iter()
            .any(|s| s.executable && (s.paddr..s.paddr + s.mem_size).contains(&entry))
        {
            return Err(invalid(format!(
                "entry point {entry:#x} is not inside any executable segment"
            )));
        }
        let symbols = read_symbols(header, &bytes);
        Ok(GuestImage {
            source: source.to_string(),
            bytes,
            entry,
            segments,
            symbols,
        })
    }

    /// Copies the segments into guest memory (linux-loader), returning the entry point.
    pub fn load(&self, memory: &GuestMemoryMmap) -> Result<u64, ImageError> {
        let mut cursor = Cursor::new(&self.bytes);
        Elf::load(
            memory,
            None,
            &mut cursor,
            Some(GuestAddress(abi::GUEST_LOAD_GPA)),
        )
        .map_err(|source| ImageError::Load {
            source_name: self.source.clone(),
            source,
        })?;
        // linux-loader's result describes the load range; the entry is the e_entry validated
        // in `parse`.
        Ok(self.entry)
    }

    /// The file bytes backing guest addresses `addr..addr+len` (for disassembly of code that was
    /// loaded from the file; BSS has no bytes).
    pub fn code_bytes(&self, addr: u64, len: u64) -> Option<&[u8]> {
        self.segments.iter().find_map(|s| {
            let end = addr.checked_add(len)?;
            if addr >= s.paddr && end <= s.paddr + s.file_size {
                let start = (s.file_offset + (addr - s.paddr)) as usize;
                self.bytes.get(start..start + len as usize)
            } else {
                None
            }
        })
    }

    /// The code of a function from its symbol to the next symbol named `<name>_end`, or to the
    /// next symbol of any name.
    pub fn function_code(&self, name: &str) -> Option<(u64, &[u8])> {
        let start = self.symbols.address(name)?;
        let end = self
            .symbols
            .address(&format!("{name}_end"))
            .or_else(|| self.symbols.next_after(start).map(|s| s.addr))?;
        Some((start, self.code_bytes(start, end.checked_sub(start)?)?))
    }
}

/// Function and label symbols from `.symtab`. A missing or damaged table yields no symbols (the
/// guest still runs; attribution then says `?`).
fn read_symbols(header: &Header, bytes: &[u8]) -> SymbolTable {
    let table = header
        .sections(LE, bytes)
        .and_then(|sections| sections.symbols(LE, bytes, elf::SHT_SYMTAB));
    let Ok(table) = table else {
        return SymbolTable::default();
    };
    let mut symbols: Vec<Symbol> = table
        .iter()
        .filter(|sym| matches!(sym.st_type(), elf::STT_FUNC | elf::STT_NOTYPE))
        .filter(|sym| sym.st_value(LE) != 0)
        .filter_map(|sym| {
            let name = std::str::from_utf8(sym.name(LE, table.strings()).ok()?).ok()?;
            let label = name.is_empty() || name.starts_with(".L") || name.starts_with('$');
            (!label).then(|| Symbol {
                name: name.to_string(),
                addr: sym.st_value(LE),
                size: sym.st_size(LE),
            })
        })
        .collect();
    symbols.sort_by(|a, b| a.addr.cmp(&b.addr).then_with(|| a.name.cmp(&b.name)));
    symbols.dedup_by(|b, a| a.addr == b.addr && a.name == b.name);
    SymbolTable { symbols }
}

/// The ELF identification and header fields a static x86-64 guest must have.
fn check_header(bytes: &[u8]) -> Result<&Header, String> {
    let Ok((header, _)) = object::pod::from_bytes::<Header>(bytes) else {
        return Err(format!(
            "file is {} bytes, shorter than an ELF64 header ({})",
            bytes.len(),
            size_of::<Header>()
        ));
    };
    let ident = header.e_ident();
    if ident.magic != elf::ELFMAG {
        return Err("no ELF magic (\\x7fELF) at offset 0".into());
    }
    if ident.class != elf::ELFCLASS64 {
        return Err(format!(
            "ELF class {} is not ELFCLASS64 (2): the guest must be a 64-bit image",
            ident.class.0
        ));
    }
    if ident.data != elf::ELFDATA2LSB {
        return Err(format!(
            "ELF data encoding {} is not little-endian (1)",
            ident.data.0
        ));
    }
    if header.e_type(LE) != elf::ET_EXEC {
        return Err(format!(
            "ELF type {} is not ET_EXEC (2): link the guest -static -no-pie",
            header.e_type(LE).0
        ));
    }
    if header.e_machine(LE) != elf::EM_X86_64 {
        return Err(format!(
            "ELF machine {} is not x86-64 (62)",
            header.e_machine(LE).0
        ));
    }
    Ok(header)
}

/// The PT_LOAD segments, each checked against the guest image area and the file's length, and
/// none overlapping another (linux-loader would copy the later one over the earlier). A static
/// guest has no interpreter and no dynamic section: an image with either was linked for a
/// loader that the guest does not have.
fn check_segments(header: &Header, bytes: &[u8]) -> Result<Vec<Segment>, String> {
    let phentsize = header.e_phentsize(LE);
    if usize::from(phentsize) != size_of::<ProgramHeader>() {
        return Err(format!("program header entry size {phentsize} is not 56"));
    }
    // The raw count: 65535 (PN_XNUM, "the count is in section 0") is no static guest's.
    let phnum = header.e_phnum(LE);
    if phnum == 0 || phnum > 64 {
        return Err(format!("{phnum} program headers; expected 1..=64"));
    }
    let phoff = header.e_phoff(LE);
    let headers = header.program_headers(LE, bytes).map_err(|_| {
        format!(
            "program headers at offset {phoff:#x} ({phnum} × 56 bytes) run past the end of \
             the file ({} bytes): truncated?",
            bytes.len()
        )
    })?;
    let mut segments = Vec::new();
    for (i, ph) in headers.iter().enumerate() {
        match ph.p_type(LE) {
            elf::PT_LOAD => segments.push((i, load_segment(ph, i, bytes.len())?)),
            elf::PT_INTERP | elf::PT_DYNAMIC => {
                let kind = if ph.p_type(LE) == elf::PT_INTERP {
                    "PT_INTERP (a program interpreter)"
                } else {
                    "PT_DYNAMIC (dynamic linking)"
                };
                return Err(format!(
                    "segment {i} is {kind}: the guest must be a static image, link it -static \
                     -no-pie"
                ));
            }
            _ => {}
        }
    }
    if segments.is_empty() {
        return Err("no PT_LOAD segment".into());
    }
    check_no_overlap(&mut segments)?;
    Ok(segments.into_iter().map(|(_, s)| s).collect())
}

/// Sorts (index, segment) by address and refuses two that share guest memory.
fn check_no_overlap(segments: &mut [(usize, Segment)]) -> Result<(), String> {
    segments.sort_by_key(|(_, s)| s.paddr);
    for pair in segments.windows(2) {
        let [(i, a), (j, b)] = pair else { continue };
        if a.paddr + a.mem_size > b.paddr {
            return Err(format!(
                "segments {i} ({:#x}..{:#x}) and {j} ({:#x}..{:#x}) overlap in guest memory",
                a.paddr,
                a.paddr + a.mem_size,
                b.paddr,
                b.paddr + b.mem_size
            ));
        }
    }
    Ok(())
}

/// PT_LOAD program header `i`, once it is checked against the guest image area and the file's
/// length `len`.
fn load_segment(ph: &ProgramHeader, i: usize, len: usize) -> Result<Segment, String> {
    let seg = Segment {
        executable: ph.p_flags(LE).0 & elf::PF_X.0 != 0,
        file_offset: ph.p_offset(LE),
        paddr: ph.p_paddr(LE),
        file_size: ph.p_filesz(LE),
        mem_size: ph.p_memsz(LE),
    };
    let allowed = abi::GUEST_LOAD_GPA..abi::GUEST_IMAGE_END;
    let end = seg.paddr.checked_add(seg.mem_size);
    if seg.file_size > seg.mem_size {
        return Err(format!(
            "segment {i}: file size {:#x} exceeds memory size {:#x}",
            seg.file_size, seg.mem_size
        ));
    }
    if !allowed.contains(&seg.paddr) || end.is_none_or(|e| e > abi::GUEST_IMAGE_END) {
        return Err(format!(
            "segment {i} at {:#x}..{:#x} is outside the guest image area {:#x}..{:#x} \
             (link the guest at {:#x}, see guest/link.ld)",
            seg.paddr,
            seg.paddr.saturating_add(seg.mem_size),
            allowed.start,
            allowed.end,
            abi::GUEST_LOAD_GPA
        ));
    }
    if seg
        .file_offset
        .checked_add(seg.file_size)
        .is_none_or(|e| e > len as u64)
    {
        return Err(format!(
            "segment {i}: file bytes {:#x}+{:#x} run past the end of the file ({len} bytes): \
             truncated?",
            seg.file_offset, seg.file_size
        ));
    }
    Ok(seg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::plan::{InsnId, StrategyId};

    fn embedded() -> GuestImage {
        GuestImage::embedded().expect("the embedded guest is valid")
    }

    /// Entry `id` of the guest's dispatch table `table` (a `.quad` array in ops.S).
    fn table_entry(image: &GuestImage, table: &str, id: u32) -> Option<u64> {
        let base = image.symbols.address(table)?;
        let bytes = image.code_bytes(base + 8 * u64::from(id), 8)?;
        Some(u64::from_le_bytes(bytes.try_into().ok()?))
    }

    /// The sites a strategy's operation labels (`empty` has no `_disable`).
    const SITES: [&str; 5] = ["", "_disable", "_body", "_restore", "_end"];

    /// Every entry of `abi::strategy::STRATEGIES` is in the built guest: both variants with
    /// their sites, at their id in `irqbench_ops` / `irqbench_lockops`, and what `calls` names.
    #[test]
    fn embedded_guest_has_every_strategy_of_the_table() {
        let image = embedded();
        for s in StrategyId::all() {
            let stem = s.name().replace('-', "_");
            for (prefix, table) in [
                ("irqbench_op_", "irqbench_ops"),
                ("irqbench_lockop_", "irqbench_lockops"),
            ] {
                let sym = format!("{prefix}{stem}");
                let addr = image.symbols.address(&sym);
                assert!(addr.is_some(), "missing {sym}");
                assert_eq!(table_entry(&image, table, s.0), addr, "{table}[{}]", s.0);
                for site in ["_body", "_restore", "_end"] {
                    let label = format!("{sym}{site}");
                    assert!(image.symbols.address(&label).is_some(), "missing {label}");
                }
            }
            for f in s.calls() {
                assert!(image.function_code(f).is_some(), "{}: no {f}", s.name());
            }
            // The measured loops, each with its inlined copies of the operation.
            for (kind, copies) in [("f", 4), ("fb", 4), ("n", 2), ("nb", 2)] {
                let sym = format!("irqbench_strategy_loop_{kind}_{stem}");
                let addr = image.symbols.address(&sym);
                assert!(addr.is_some(), "missing {sym}");
                let table = format!("irqbench_loops_{kind}");
                assert_eq!(table_entry(&image, &table, s.0), addr, "{table}[{}]", s.0);
                for copy in 0..copies {
                    let label = format!("irqbench_op{kind}{copy}_{stem}_restore");
                    assert!(image.symbols.address(&label).is_some(), "missing {label}");
                }
            }
        }
        let (ops, lockops) = ("irqbench_ops", "irqbench_lockops");
        let span = image
            .symbols
            .address(lockops)
            .zip(image.symbols.address(ops));
        let count = u64::from(abi::strategy::COUNT);
        assert_eq!(span.map(|(l, o)| l - o), Some(8 * count), "{ops} entries");
        assert!(image.function_code("irqbench_op_native_popf").is_some());
    }

    /// Every entry of `abi::insn::INSNS` has its function at its id in `irqbench_insns`.
    #[test]
    fn embedded_guest_has_every_probe_of_the_table() {
        let image = embedded();
        for i in InsnId::all() {
            let sym = i.symbol();
            let addr = image.symbols.address(&sym);
            assert!(addr.is_some(), "missing {sym}");
            assert_eq!(
                table_entry(&image, "irqbench_insns", i.0),
                addr,
                "entry {}",
                i.0
            );
        }
    }

    /// The other way round: every strategy or probe symbol of the guest belongs to an entry of
    /// the tables (a macro or function added to ops.S alone would not be measurable).
    #[test]
    fn embedded_guest_has_no_strategy_or_probe_the_tables_lack() {
        let image = embedded();
        let op_sites: Vec<String> = StrategyId::all()
            .flat_map(|s| SITES.map(|site| format!("{}{site}", s.name().replace('-', "_"))))
            .collect();
        let probes: Vec<String> = InsnId::all().map(InsnId::symbol).collect();
        for sym in image.symbols.iter().map(|s| s.name.as_str()) {
            // irqbench_op_once is the mixed workload's helper.
            let op = crate::identity::strategy_symbol_rest(sym).filter(|r| *r != "once");
            if let Some(rest) = op {
                assert!(
                    op_sites.iter().any(|s| s == rest),
                    "{sym}: no such strategy"
                );
            }
            let helpers = ["irqbench_insn_loop", "irqbench_insn_end"];
            if sym.starts_with("irqbench_insn_") && !helpers.contains(&sym) {
                assert!(probes.iter().any(|p| p == sym), "{sym}: no such probe");
            }
        }
    }

    #[test]
    fn lookup_finds_the_enclosing_symbol() {
        let image = embedded();
        let restore = image
            .symbols
            .address("irqbench_op_native_skip_restore")
            .expect("symbol");
        let (sym, off) = image.symbols.lookup(restore + 1).expect("inside");
        assert_eq!(sym.name, "irqbench_op_native_skip_restore");
        assert_eq!(off, 1);
    }

    /// `irqbench_op_native_popf_end` shares its address with the start of
    /// `irqbench_op_native_cli_sti`; an exit there belongs to cli/sti, whose own labels start
    /// there too (the most specific one, the `_disable` site, is the one reported).
    #[test]
    fn an_end_label_never_wins_over_the_function_starting_there() {
        let image = embedded();
        let start = image
            .symbols
            .address("irqbench_op_native_cli_sti")
            .expect("symbol");
        assert_eq!(
            image.symbols.address("irqbench_op_native_popf_end"),
            Some(start),
            "the embedded guest no longer shares the address; pick another pair"
        );
        for rip in [start, start + 1] {
            let (sym, _) = image.symbols.lookup(rip).expect("inside");
            assert!(
                sym.name.starts_with("irqbench_op_native_cli_sti") && !sym.is_end_label(),
                "{rip:#x} resolved to {}",
                sym.name
            );
        }
        let (sym, off) = image
            .symbols
            .lookup_for(start, |n| n == "irqbench_op_native_cli_sti")
            .expect("inside");
        assert_eq!((sym.name.as_str(), off), ("irqbench_op_native_cli_sti", 0));
        // A caller measuring native-popf may still claim the address (a trap reported after
        // popf's last instruction).
        let (sym, _) = image
            .symbols
            .lookup_for(start, |n| n.starts_with("irqbench_op_native_popf"))
            .expect("inside");
        assert_eq!(sym.name, "irqbench_op_native_popf_end");
    }

    #[test]
    fn a_sized_symbol_holding_the_rip_wins() {
        let sym = |name: &str, addr, size| Symbol {
            name: name.into(),
            addr,
            size,
        };
        let table = SymbolTable {
            symbols: vec![sym("a_end", 0x10, 0), sym("b", 0x10, 8), sym("zz", 0x10, 0)],
        };
        assert_eq!(table.lookup(0x12).expect("inside").0.name, "b");
        assert_eq!(table.lookup(0x18).expect("past b").0.name, "zz");
        assert!(table.lookup(0xF).is_none());
    }

    /// A path from the command line is shown on one line in the image's errors and warning.
    #[test]
    fn the_image_path_stays_on_one_line() {
        let err = GuestImage::parse(b"\x7fELF junk".to_vec(), "g\nFORGED.elf")
            .expect_err("junk")
            .to_string();
        assert!(
            err.contains("g\\nFORGED.elf") && !err.contains('\n'),
            "{err}"
        );
        let mut bytes = EMBEDDED_GUEST.to_vec();
        bytes[60..62].copy_from_slice(&0u16.to_le_bytes());
        let image = GuestImage::parse(bytes, "g\u{1b}\nFORGED.elf").expect("a guest");
        let warning = image.symbol_warning().expect("a warning");
        assert!(warning.contains("g\\u{1b}\\nFORGED.elf"), "{warning}");
    }

    #[test]
    fn a_stripped_guest_loads_with_a_warning() {
        let mut bytes = EMBEDDED_GUEST.to_vec();
        bytes[60..62].copy_from_slice(&0u16.to_le_bytes()); // e_shnum: no section headers
        let image = GuestImage::parse(bytes, "stripped.elf").expect("still a valid guest");
        let warning = image.symbol_warning().expect("a warning");
        assert!(
            warning.contains("stripped.elf") && warning.contains("no symbol table"),
            "{warning}"
        );
        assert!(embedded().symbol_warning().is_none());
    }

    #[test]
    fn devices_are_refused_without_reading() {
        let err = GuestImage::from_file(Path::new("/dev/zero"))
            .expect_err("a device")
            .to_string();
        assert!(
            err.contains("/dev/zero") && err.contains("character device"),
            "{err}"
        );
    }

    /// Malformed images, each built here from the real guest, and the message each must give.
    #[test]
    fn malformed_images_are_rejected_with_their_own_message() {
        let good = EMBEDDED_GUEST.to_vec();
        let mut cases: Vec<(&str, Vec<u8>, &str)> = Vec::new();
        cases.push((
            "truncated header",
            good[..40].to_vec(),
            "shorter than an ELF64 header",
        ));
        cases.push(("truncated body", good[..100].to_vec(), "truncated?"));
        let mut bad_magic = good.clone();
        bad_magic[0] = b'X';
        cases.push(("magic", bad_magic, "no ELF magic"));
        let mut class32 = good.clone();
        class32[4] = 1;
        cases.push(("class", class32, "not ELFCLASS64"));
        let mut big = good.clone();
        big[5] = 2;
        cases.push(("endian", big, "not little-endian"));
        let mut dynamic = good.clone();
        dynamic[16] = 3;
        cases.push(("type", dynamic, "not ET_EXEC"));
        let mut arm = good.clone();
        arm[18] = 183;
        arm[19] = 0;
        cases.push(("machine", arm, "not x86-64"));
        let phoff = u64::from_le_bytes(good[32..40].try_into().expect("8 bytes")) as usize;
        let mut low = good.clone();
        low[phoff + 24..phoff + 32].copy_from_slice(&0x1000u64.to_le_bytes());
        cases.push((
            "segment outside RAM area",
            low,
            "outside the guest image area",
        ));
        let mut huge = good.clone();
        huge[phoff + 40..phoff + 48].copy_from_slice(&(1u64 << 40).to_le_bytes());
        cases.push(("huge segment", huge, "outside the guest image area"));
        let mut entry = good.clone();
        entry[24..32].copy_from_slice(&0x3F_F000u64.to_le_bytes());
        cases.push(("entry outside", entry, "not inside any executable segment"));
        let mut xnum = good.clone();
        xnum[56..58].copy_from_slice(&0xFFFFu16.to_le_bytes());
        cases.push(("phnum PN_XNUM", xnum, "65535 program headers"));
        let second = phoff + 56;
        let mut overlap = good.clone();
        let first_paddr = u64::from_le_bytes(good[phoff + 24..phoff + 32].try_into().unwrap());
        overlap[second + 24..second + 32].copy_from_slice(&(first_paddr + 0x10).to_le_bytes());
        cases.push(("overlapping PT_LOAD", overlap, "overlap in guest memory"));
        for (p_type, name) in [(3u32, "PT_INTERP"), (2, "PT_DYNAMIC")] {
            let mut linked = good.clone();
            linked[second..second + 4].copy_from_slice(&p_type.to_le_bytes());
            cases.push((name, linked, name));
        }
        for (what, bytes, expected) in cases {
            let err = GuestImage::parse(bytes, "test.elf")
                .expect_err(what)
                .to_string();
            assert!(
                err.contains(expected) && err.contains("test.elf"),
                "{what}: got {err:?}"
            );
        }
    }

    #[test]
    fn missing_file_names_the_path() {
        let err = GuestImage::from_file(Path::new("/nonexistent/guest.elf"))
            .expect_err("no such file")
            .to_string();
        assert!(err.contains("/nonexistent/guest.elf"), "{err}");
    }
}
