//! KVM binary statistics (`KVM_GET_STATS_FD`), per VM and per vCPU.
//!
//! The stats fd's layout (Linux `Documentation/virt/kvm/api.rst`, "KVM_GET_STATS_FD") is a
//! header, an id string, a block of descriptors and a data block of `u64` words. The header and
//! descriptors never change for the life of the fd, so they are parsed once into a
//! [`StatsSchema`]; a [`StatsSnapshot`] is then a single `pread` of the data block, cheap enough
//! to take around every measured phase.
//!
//! The fd's contents are treated as untrusted input: every count, size and offset is
//! bounds-checked, so a malformed file yields a [`StatsError`], never a panic.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use kvm_bindings::{
    KVMIO, KVM_STATS_TYPE_CUMULATIVE, KVM_STATS_TYPE_INSTANT, KVM_STATS_TYPE_LINEAR_HIST,
    KVM_STATS_TYPE_LOG_HIST, KVM_STATS_TYPE_MASK, KVM_STATS_TYPE_PEAK,
};
use vmm_sys_util::ioctl::ioctl;
use vmm_sys_util::ioctl_io_nr;

// kvm-ioctls has no wrapper for it; valid on both VM and vCPU fds.
ioctl_io_nr!(KVM_GET_STATS_FD, KVMIO, 0xce);

/// `struct kvm_stats_header`: six `u32`s.
const HEADER_SIZE: usize = 24;
/// `struct kvm_stats_desc` without its trailing name.
const DESC_SIZE: usize = 16;
/// The kernel uses 48 (`KVM_STATS_NAME_SIZE`); anything far above it is a corrupt header.
pub const MAX_NAME_SIZE: u32 = 1024;
/// x86 publishes well under a hundred stats per fd.
pub const MAX_NUM_DESC: u32 = 4096;
/// Bounds the allocation a corrupt descriptor could ask for.
pub const MAX_DATA_LEN: u64 = 16 << 20;

#[derive(Debug, thiserror::Error)]
pub enum StatsError {
    #[error("KVM_GET_STATS_FD failed")]
    GetStatsFd(#[source] io::Error),
    #[error("cannot read the stats header")]
    ReadHeader(#[source] io::Error),
    #[error("stats header name_size {0} is outside 1..={MAX_NAME_SIZE}")]
    NameSize(u32),
    #[error("stats header num_desc {0} exceeds {MAX_NUM_DESC}")]
    TooManyDescriptors(u32),
    #[error("cannot read the stats id ({len} bytes at offset {offset})")]
    ReadId {
        offset: u32,
        len: u32,
        #[source]
        source: io::Error,
    },
    #[error("cannot read {count} stats descriptors at offset {offset}")]
    ReadDescriptors {
        offset: u32,
        count: u32,
        #[source]
        source: io::Error,
    },
    #[error("stats descriptor {index} has an empty or non-ASCII name")]
    BadName { index: usize },
    #[error("stat {name} has no values (size 0)")]
    EmptyStat { name: String },
    #[error("stat {name}: {size} values at data offset {offset} lie outside the data block")]
    OutOfBounds {
        name: String,
        offset: u32,
        size: u16,
    },
    #[error("cannot read the stats data block ({len} bytes at offset {offset})")]
    ReadData {
        offset: u32,
        len: usize,
        #[source]
        source: io::Error,
    },
}

/// How a stat's values evolve, from `KVM_STATS_TYPE_*`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StatKind {
    Cumulative,
    Instant,
    Peak,
    LinearHistogram,
    LogHistogram,
    Unknown(u32),
}

impl StatKind {
    fn from_flags(flags: u32) -> StatKind {
        match flags & KVM_STATS_TYPE_MASK {
            KVM_STATS_TYPE_CUMULATIVE => StatKind::Cumulative,
            KVM_STATS_TYPE_INSTANT => StatKind::Instant,
            KVM_STATS_TYPE_PEAK => StatKind::Peak,
            KVM_STATS_TYPE_LINEAR_HIST => StatKind::LinearHistogram,
            KVM_STATS_TYPE_LOG_HIST => StatKind::LogHistogram,
            other => StatKind::Unknown(other),
        }
    }

    pub fn is_histogram(&self) -> bool {
        matches!(self, StatKind::LinearHistogram | StatKind::LogHistogram)
    }
}

/// One `struct kvm_stats_desc`, decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatDescriptor {
    pub name: String,
    pub kind: StatKind,
    /// The raw `flags` word: type, unit and base; only the type is interpreted here.
    pub flags: u32,
    /// Number of `u64` values (buckets for histograms).
    pub size: u16,
    /// Byte offset of the first value within the data block.
    pub offset: u32,
}

/// What a stats fd publishes; fixed for the life of the fd.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatsSchema {
    /// The kernel's id string, e.g. `kvm-1234` or `kvm-1234/vcpu-0`.
    pub id: String,
    pub descriptors: Vec<StatDescriptor>,
    data_offset: u32,
    data_len: usize,
    /// Index into a snapshot's flattened values of each descriptor's first value.
    starts: Vec<usize>,
    by_name: HashMap<String, usize>,
}

impl StatsSchema {
    /// Bytes one snapshot reads.
    pub fn data_len(&self) -> usize {
        self.data_len
    }

    fn values_of<'a>(&self, index: usize, values: &'a [u64]) -> &'a [u64] {
        let start = self.starts[index];
        &values[start..start + usize::from(self.descriptors[index].size)]
    }
}

/// An open stats fd and its parsed schema.
#[derive(Debug)]
pub struct StatsFd {
    file: File,
    schema: Arc<StatsSchema>,
}

impl StatsFd {
    pub fn for_vm(vm: &kvm_ioctls::VmFd) -> Result<StatsFd, StatsError> {
        StatsFd::from_raw_stats_fd(get_stats_fd(vm)?)
    }

    pub fn for_vcpu(vcpu: &kvm_ioctls::VcpuFd) -> Result<StatsFd, StatsError> {
        StatsFd::from_raw_stats_fd(get_stats_fd(vcpu)?)
    }

    /// Takes any fd laid out like a stats fd (tests feed it crafted files) and parses its
    /// header and descriptors.
    pub fn from_raw_stats_fd(fd: OwnedFd) -> Result<StatsFd, StatsError> {
        let file = File::from(fd);
        let schema = read_schema(&file)?;
        Ok(StatsFd {
            file,
            schema: Arc::new(schema),
        })
    }

    pub fn schema(&self) -> &StatsSchema {
        &self.schema
    }

    pub fn snapshot(&self) -> Result<StatsSnapshot, StatsError> {
        let schema = &self.schema;
        let mut buf = vec![0u8; schema.data_len];
        self.file
            .read_exact_at(&mut buf, u64::from(schema.data_offset))
            .map_err(|source| StatsError::ReadData {
                offset: schema.data_offset,
                len: schema.data_len,
                source,
            })?;
        Ok(StatsSnapshot {
            values: decode_values(schema, &buf),
            schema: Arc::clone(schema),
        })
    }
}

fn get_stats_fd(fd: &impl AsRawFd) -> Result<OwnedFd, StatsError> {
    // SAFETY: KVM_GET_STATS_FD takes no argument and touches no user memory; `fd` is a live
    // VM or vCPU fd borrowed for the duration of the call.
    let ret = unsafe { ioctl(fd, KVM_GET_STATS_FD()) };
    if ret < 0 {
        return Err(StatsError::GetStatsFd(io::Error::last_os_error()));
    }
    // SAFETY: the kernel just created this fd for us; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(ret) })
}

fn u32_at(buf: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(buf[at..at + 4].try_into().unwrap())
}

fn u16_at(buf: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes(buf[at..at + 2].try_into().unwrap())
}

/// The NUL-terminated string at the start of `buf`, if it is non-empty printable ASCII.
fn c_name(buf: &[u8]) -> Option<String> {
    let len = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    let name = &buf[..len];
    if name.is_empty() || !name.iter().all(|b| b.is_ascii_graphic()) {
        return None;
    }
    Some(String::from_utf8_lossy(name).into_owned())
}

struct Header {
    name_size: u32,
    num_desc: u32,
    id_offset: u32,
    desc_offset: u32,
    data_offset: u32,
}

fn read_header(file: &File) -> Result<Header, StatsError> {
    let mut buf = [0u8; HEADER_SIZE];
    file.read_exact_at(&mut buf, 0)
        .map_err(StatsError::ReadHeader)?;
    // Field 0 is `flags`, reserved (always 0 so far); ignoring it keeps newer kernels readable.
    let header = Header {
        name_size: u32_at(&buf, 4),
        num_desc: u32_at(&buf, 8),
        id_offset: u32_at(&buf, 12),
        desc_offset: u32_at(&buf, 16),
        data_offset: u32_at(&buf, 20),
    };
    if header.name_size == 0 || header.name_size > MAX_NAME_SIZE {
        return Err(StatsError::NameSize(header.name_size));
    }
    if header.num_desc > MAX_NUM_DESC {
        return Err(StatsError::TooManyDescriptors(header.num_desc));
    }
    Ok(header)
}

fn read_id(file: &File, header: &Header) -> Result<String, StatsError> {
    let mut buf = vec![0u8; header.name_size as usize];
    file.read_exact_at(&mut buf, u64::from(header.id_offset))
        .map_err(|source| StatsError::ReadId {
            offset: header.id_offset,
            len: header.name_size,
            source,
        })?;
    let len = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    Ok(String::from_utf8_lossy(&buf[..len]).into_owned())
}

fn parse_descriptor(entry: &[u8], index: usize) -> Result<StatDescriptor, StatsError> {
    let flags = u32_at(entry, 0);
    let name = c_name(&entry[DESC_SIZE..]).ok_or(StatsError::BadName { index })?;
    let desc = StatDescriptor {
        kind: StatKind::from_flags(flags),
        flags,
        // Bytes 4..6 are the exponent and 12..16 the bucket size, which nothing here reads.
        size: u16_at(entry, 6),
        offset: u32_at(entry, 8),
        name,
    };
    if desc.size == 0 {
        return Err(StatsError::EmptyStat { name: desc.name });
    }
    Ok(desc)
}

fn read_descriptors(file: &File, header: &Header) -> Result<Vec<StatDescriptor>, StatsError> {
    // Both factors are capped by read_header, so this cannot overflow.
    let stride = DESC_SIZE + header.name_size as usize;
    let mut buf = vec![0u8; stride * header.num_desc as usize];
    file.read_exact_at(&mut buf, u64::from(header.desc_offset))
        .map_err(|source| StatsError::ReadDescriptors {
            offset: header.desc_offset,
            count: header.num_desc,
            source,
        })?;
    buf.chunks_exact(stride)
        .enumerate()
        .map(|(index, entry)| parse_descriptor(entry, index))
        .collect()
}

/// End of a stat's values within the data block, if it fits under [`MAX_DATA_LEN`].
fn data_end(desc: &StatDescriptor) -> Option<u64> {
    let end = u64::from(desc.offset) + u64::from(desc.size) * 8;
    (end <= MAX_DATA_LEN).then_some(end)
}

fn out_of_bounds(desc: &StatDescriptor) -> StatsError {
    StatsError::OutOfBounds {
        name: desc.name.clone(),
        offset: desc.offset,
        size: desc.size,
    }
}

/// Reads up to `buf.len()` bytes at `offset`; the result is shorter only at end of file.
fn read_up_to(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// The header does not give the data block's length, so it is the furthest any descriptor
/// reaches; a trial read then shows which stats, if any, point past the end of the fd.
fn data_block_len(
    file: &File,
    header: &Header,
    descriptors: &[StatDescriptor],
) -> Result<usize, StatsError> {
    let mut len = 0;
    for desc in descriptors {
        len = len.max(data_end(desc).ok_or_else(|| out_of_bounds(desc))?);
    }
    // Bounded by MAX_DATA_LEN above.
    let len = len as usize;
    let mut buf = vec![0u8; len];
    let available =
        read_up_to(file, &mut buf, u64::from(header.data_offset)).map_err(|source| {
            StatsError::ReadData {
                offset: header.data_offset,
                len,
                source,
            }
        })?;
    if let Some(desc) = descriptors
        .iter()
        .find(|d| data_end(d).is_some_and(|end| end > available as u64))
    {
        return Err(out_of_bounds(desc));
    }
    Ok(len)
}

fn read_schema(file: &File) -> Result<StatsSchema, StatsError> {
    let header = read_header(file)?;
    let id = read_id(file, &header)?;
    let descriptors = read_descriptors(file, &header)?;
    let data_len = data_block_len(file, &header, &descriptors)?;
    let mut starts = Vec::with_capacity(descriptors.len());
    let mut next = 0;
    for desc in &descriptors {
        starts.push(next);
        next += usize::from(desc.size);
    }
    let mut by_name = HashMap::with_capacity(descriptors.len());
    for (i, desc) in descriptors.iter().enumerate() {
        // Names are unique in practice; should a kernel repeat one, the first keeps the name.
        by_name.entry(desc.name.clone()).or_insert(i);
    }
    Ok(StatsSchema {
        id,
        descriptors,
        data_offset: header.data_offset,
        data_len,
        starts,
        by_name,
    })
}

/// Flattens each descriptor's values, in descriptor order, out of the raw data block.
fn decode_values(schema: &StatsSchema, data: &[u8]) -> Vec<u64> {
    let total = schema.descriptors.iter().map(|d| usize::from(d.size)).sum();
    let mut values = Vec::with_capacity(total);
    for desc in &schema.descriptors {
        let start = desc.offset as usize;
        let bytes = &data[start..start + usize::from(desc.size) * 8];
        values.extend(
            bytes
                .chunks_exact(8)
                .map(|w| u64::from_ne_bytes(w.try_into().unwrap())),
        );
    }
    values
}

/// The values of every stat at one instant.
#[derive(Clone, Debug)]
pub struct StatsSnapshot {
    schema: Arc<StatsSchema>,
    /// Each descriptor's values, concatenated in descriptor order.
    values: Vec<u64>,
}

impl StatsSnapshot {
    /// The first value of stat `name` (bucket 0 for a histogram).
    #[cfg(test)]
    pub fn get(&self, name: &str) -> Option<u64> {
        self.values(name).map(|v| v[0])
    }

    /// All values of stat `name` (the buckets of a histogram).
    #[cfg(test)]
    pub fn values(&self, name: &str) -> Option<&[u64]> {
        let &index = self.schema.by_name.get(name)?;
        Some(self.schema.values_of(index, &self.values))
    }

    /// The scalar (`size == 1`) stats, by kernel name, in descriptor order.
    #[cfg(test)]
    pub fn iter(&self) -> impl Iterator<Item = (&str, u64)> + '_ {
        self.schema
            .descriptors
            .iter()
            .enumerate()
            .filter(|(_, d)| d.size == 1)
            .map(|(i, d)| (d.name.as_str(), self.values[self.schema.starts[i]]))
    }

    /// What changed since `earlier`, one entry per stat present in both.
    ///
    /// Cumulative stats (and any of a type this code does not know) give `self - earlier`; one
    /// that went backwards gives 0 and is listed in
    /// [`StatsDelta::backwards`]. Instant and peak stats give their value now. Histograms give
    /// the change in their total sample count (the sum over buckets).
    pub fn delta(&self, earlier: &StatsSnapshot) -> StatsDelta {
        let same_schema = Arc::ptr_eq(&self.schema, &earlier.schema);
        let mut delta = StatsDelta::default();
        for (i, desc) in self.schema.descriptors.iter().enumerate() {
            let j = if same_schema {
                i
            } else {
                match earlier.schema.by_name.get(&desc.name) {
                    Some(&j) => j,
                    None => continue,
                }
            };
            let now = self.schema.values_of(i, &self.values);
            let before = earlier.schema.values_of(j, &earlier.values);
            let value = match desc.kind {
                StatKind::Instant => now[0],
                StatKind::Peak => {
                    delta.peaks.insert(desc.name.clone());
                    now[0]
                }
                kind => {
                    let (now, before) = if kind.is_histogram() {
                        (sum(now), sum(before))
                    } else {
                        (now[0], before[0])
                    };
                    if now < before {
                        delta.backwards.insert(desc.name.clone());
                    }
                    now.saturating_sub(before)
                }
            };
            delta.values.insert(desc.name.clone(), value);
        }
        delta
    }
}

fn sum(values: &[u64]) -> u64 {
    values.iter().fold(0, |acc, &v| acc.saturating_add(v))
}

/// Per-stat changes between two snapshots, by kernel name; see [`StatsSnapshot::delta`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StatsDelta {
    pub values: BTreeMap<String, u64>,
    /// Cumulative stats (or histogram totals) that were lower in the later snapshot; their
    /// value is clamped to 0 rather than trusted.
    pub backwards: BTreeSet<String>,
    /// Peak stats, which [`StatsDelta::add`] combines by maximum rather than by sum.
    peaks: BTreeSet<String>,
}

impl StatsDelta {
    pub fn get(&self, name: &str) -> Option<u64> {
        self.values.get(name).copied()
    }

    pub fn nonzero(&self) -> impl Iterator<Item = (&str, u64)> + '_ {
        self.values
            .iter()
            .filter(|(_, &v)| v != 0)
            .map(|(k, &v)| (k.as_str(), v))
    }

    /// Accumulates `other` (another vCPU, another repeat): values add up, except peaks, where
    /// a sum would be no one's peak.
    pub fn add(&mut self, other: &StatsDelta) {
        for (name, &value) in &other.values {
            let slot = self.values.entry(name.clone()).or_insert(0);
            *slot = if other.peaks.contains(name) || self.peaks.contains(name) {
                (*slot).max(value)
            } else {
                slot.saturating_add(value)
            };
        }
        self.backwards.extend(other.backwards.iter().cloned());
        self.peaks.extend(other.peaks.iter().cloned());
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use kvm_bindings::{
        kvm_userspace_memory_region, KVM_STATS_TYPE_SHIFT, KVM_STATS_UNIT_MASK,
        KVM_STATS_UNIT_SECONDS,
    };
    use kvm_ioctls::{Kvm, VcpuExit};
    use vmm_sys_util::tempfile::TempFile;

    use super::*;

    /// The one skip-or-fail rule of every KVM test (fails under IRQBENCH_REQUIRE_KVM=1).
    fn open_kvm() -> Option<Kvm> {
        crate::host::test_kvm()
    }

    #[test]
    fn vm_and_vcpu_schemas_are_sane() {
        let Some(kvm) = open_kvm() else { return };
        let vm = kvm.create_vm().unwrap();
        let vcpu = vm.create_vcpu(0).unwrap();
        let vm_stats = StatsFd::for_vm(&vm).unwrap();
        let vcpu_stats = StatsFd::for_vcpu(&vcpu).unwrap();

        for stats in [&vm_stats, &vcpu_stats] {
            let schema = stats.schema();
            assert!(!schema.id.is_empty());
            assert!(!schema.descriptors.is_empty());
            for d in &schema.descriptors {
                assert!(!d.name.is_empty() && d.name.is_ascii(), "{:?}", d.name);
            }
            println!("{} ({} stats):", schema.id, schema.descriptors.len());
            for d in &schema.descriptors {
                println!(
                    "  {:<36} {:<16?} flags={:#x} size={}",
                    d.name, d.kind, d.flags, d.size
                );
            }
        }
        assert!(vcpu_stats.schema().by_name.contains_key("exits"));
    }

    #[test]
    fn cumulative_deltas_never_go_negative() {
        let Some(kvm) = open_kvm() else { return };
        let vm = kvm.create_vm().unwrap();
        let vcpu = vm.create_vcpu(0).unwrap();
        for stats in [
            StatsFd::for_vm(&vm).unwrap(),
            StatsFd::for_vcpu(&vcpu).unwrap(),
        ] {
            let a = stats.snapshot().unwrap();
            let b = stats.snapshot().unwrap();
            let d = b.delta(&a);
            assert!(d.backwards.is_empty(), "{:?}", d.backwards);
            // Every stat the kernel publishes is reachable by name.
            for desc in &stats.schema().descriptors {
                assert!(b.get(&desc.name).is_some());
                assert!(d.get(&desc.name).is_some());
            }
            assert_eq!(b.iter().count(), {
                let scalars = stats.schema().descriptors.iter().filter(|d| d.size == 1);
                scalars.count()
            });
        }
    }

    /// Real-mode guest at 0x1000: `mov dx, 0x3f8; out dx, al; hlt`.
    const GUEST_CODE: [u8; 5] = [0xba, 0xf8, 0x03, 0xee, 0xf4];
    const GUEST_ADDR: u64 = 0x1000;
    const PAGE: usize = 0x1000;

    struct GuestPage(*mut libc::c_void);

    impl GuestPage {
        fn new() -> GuestPage {
            // SAFETY: a fresh anonymous private mapping; no existing memory is affected.
            let addr = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    PAGE,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                    -1,
                    0,
                )
            };
            assert_ne!(addr, libc::MAP_FAILED, "{}", io::Error::last_os_error());
            GuestPage(addr)
        }
    }

    impl Drop for GuestPage {
        fn drop(&mut self) {
            // SAFETY: unmaps exactly the mapping `new` created; the VM using it is dropped first.
            unsafe { libc::munmap(self.0, PAGE) };
        }
    }

    #[test]
    fn one_io_exit_moves_exits() {
        let Some(kvm) = open_kvm() else { return };
        let page = GuestPage::new();
        // SAFETY: `page` is a PAGE-sized writable mapping and GUEST_CODE is shorter than that.
        unsafe {
            std::ptr::copy_nonoverlapping(GUEST_CODE.as_ptr(), page.0.cast(), GUEST_CODE.len())
        };
        let vm = kvm.create_vm().unwrap();
        let region = kvm_userspace_memory_region {
            slot: 0,
            guest_phys_addr: GUEST_ADDR,
            memory_size: PAGE as u64,
            userspace_addr: page.0 as u64,
            flags: 0,
        };
        // SAFETY: the region is a live mapping owned by `page`, which outlives `vm` (declared
        // earlier, so dropped later).
        unsafe { vm.set_user_memory_region(region).unwrap() };
        let mut vcpu = vm.create_vcpu(0).unwrap();
        let mut sregs = vcpu.get_sregs().unwrap();
        sregs.cs.base = 0;
        sregs.cs.selector = 0;
        vcpu.set_sregs(&sregs).unwrap();
        let mut regs = vcpu.get_regs().unwrap();
        regs.rip = GUEST_ADDR;
        regs.rflags = 2;
        vcpu.set_regs(&regs).unwrap();

        let stats = StatsFd::for_vcpu(&vcpu).unwrap();
        let before = stats.snapshot().unwrap();
        let mut runs = 0;
        loop {
            runs += 1;
            match vcpu.run().unwrap() {
                VcpuExit::IoOut(0x3f8, data) => {
                    assert_eq!(data.len(), 1);
                    break;
                }
                other => assert!(runs < 10, "unexpected exit {other:?}"),
            }
        }
        let after = stats.snapshot().unwrap();
        let delta = after.delta(&before);
        print_delta(&format!("one I/O exit, {runs} KVM_RUN"), &delta);
        // A KVM_RUN that returns KVM_EXIT_IO left the guest at least once. Which per-reason
        // counter moves is vendor code's business: PVM emulates this real-mode `out` (it
        // counts `insn_emulation`, not `io_exits`), so only `exits` is asserted.
        assert!(delta.get("exits").unwrap() >= 1);
        assert!(delta.backwards.is_empty());

        // Turn the `hlt` into `jmp` back to the `out`, so each further KVM_RUN is one more I/O
        // exit: shows how `exits` scales with exits to userspace.
        const JMP_TO_OUT: [u8; 2] = [0xeb, 0xfd];
        // SAFETY: offset 4 + 2 bytes lies inside the page; the vCPU is not running.
        unsafe {
            std::ptr::copy_nonoverlapping(JMP_TO_OUT.as_ptr(), page.0.cast::<u8>().add(4), 2)
        };
        const REPEATS: u64 = 100;
        let before = stats.snapshot().unwrap();
        for _ in 0..REPEATS {
            assert!(matches!(vcpu.run().unwrap(), VcpuExit::IoOut(0x3f8, _)));
        }
        let delta = stats.snapshot().unwrap().delta(&before);
        print_delta(&format!("{REPEATS} I/O exits"), &delta);
        assert!(delta.get("exits").unwrap() >= REPEATS);
    }

    fn print_delta(what: &str, delta: &StatsDelta) {
        println!("{what}: nonzero vCPU stat deltas:");
        for (name, value) in delta.nonzero() {
            println!("  {name} = {value}");
        }
    }

    fn header(name_size: u32, num_desc: u32, desc_offset: u32, data_offset: u32) -> Vec<u8> {
        [
            0,
            name_size,
            num_desc,
            HEADER_SIZE as u32,
            desc_offset,
            data_offset,
        ]
        .iter()
        .flat_map(|v| v.to_ne_bytes())
        .collect()
    }

    fn descriptor(name: &str, flags: u32, size: u16, offset: u32, name_size: u32) -> Vec<u8> {
        let mut d = Vec::new();
        d.extend(flags.to_ne_bytes());
        d.extend(0i16.to_ne_bytes());
        d.extend(size.to_ne_bytes());
        d.extend(offset.to_ne_bytes());
        d.extend(0u32.to_ne_bytes());
        let mut n = name.as_bytes().to_vec();
        n.resize(name_size as usize, 0);
        d.extend(n);
        d
    }

    /// A well-formed file: header, id, two descriptors, data.
    fn synthetic(counter: u64, hist: [u64; 2]) -> Vec<u8> {
        const NS: u32 = 16;
        let desc_offset = HEADER_SIZE as u32 + NS;
        let data_offset = desc_offset + 2 * (DESC_SIZE as u32 + NS);
        let mut f = header(NS, 2, desc_offset, data_offset);
        let mut id = b"kvm-test".to_vec();
        id.resize(NS as usize, 0);
        f.extend(id);
        f.extend(descriptor("exits", KVM_STATS_TYPE_CUMULATIVE, 1, 0, NS));
        let hist_flags = KVM_STATS_TYPE_LOG_HIST << KVM_STATS_TYPE_SHIFT | KVM_STATS_UNIT_SECONDS;
        f.extend(descriptor("halt_hist", hist_flags, 2, 8, NS));
        for v in [counter, hist[0], hist[1]] {
            f.extend(v.to_ne_bytes());
        }
        f
    }

    fn stats_from(bytes: &[u8]) -> Result<StatsFd, StatsError> {
        let mut file = TempFile::new().unwrap().into_file();
        file.write_all(bytes).unwrap();
        StatsFd::from_raw_stats_fd(file.into())
    }

    #[test]
    fn parses_a_synthetic_file() {
        let stats = stats_from(&synthetic(7, [1, 2])).unwrap();
        let schema = stats.schema();
        assert_eq!(schema.id, "kvm-test");
        let names: Vec<&str> = schema.descriptors.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["exits", "halt_hist"]);
        let hist = &schema.descriptors[schema.by_name["halt_hist"]];
        assert_eq!(hist.kind, StatKind::LogHistogram);
        assert_eq!(hist.flags & KVM_STATS_UNIT_MASK, KVM_STATS_UNIT_SECONDS);
        assert_eq!(schema.data_len(), 24);
        let snap = stats.snapshot().unwrap();
        assert_eq!(snap.get("exits"), Some(7));
        assert_eq!(snap.values("halt_hist"), Some(&[1, 2][..]));
        assert_eq!(snap.iter().collect::<Vec<_>>(), [("exits", 7)]);
    }

    #[test]
    fn delta_is_saturating_and_flags_backwards_counters() {
        let earlier = stats_from(&synthetic(10, [1, 1]))
            .unwrap()
            .snapshot()
            .unwrap();
        let later = stats_from(&synthetic(4, [3, 2]))
            .unwrap()
            .snapshot()
            .unwrap();
        let d = later.delta(&earlier);
        assert_eq!(d.get("exits"), Some(0));
        assert_eq!(d.get("halt_hist"), Some(3));
        assert!(d.backwards.contains("exits"));
        assert_eq!(d.nonzero().collect::<Vec<_>>(), [("halt_hist", 3)]);

        let mut total = d.clone();
        total.add(&earlier.delta(&later));
        assert_eq!(total.get("exits"), Some(6));
        assert_eq!(total.get("halt_hist"), Some(3));
        assert!(total.backwards.contains("halt_hist"));
    }

    #[test]
    fn rejects_malformed_files() {
        let good = synthetic(1, [0, 0]);

        let err = stats_from(&good[..10]).err().unwrap();
        assert!(matches!(err, StatsError::ReadHeader(_)), "{err}");

        let mut f = good.clone();
        f[16..20].copy_from_slice(&100_000u32.to_ne_bytes());
        let err = stats_from(&f).err().unwrap();
        assert!(matches!(err, StatsError::ReadDescriptors { .. }), "{err}");

        for name_size in [0, u32::MAX] {
            let mut f = good.clone();
            f[4..8].copy_from_slice(&name_size.to_ne_bytes());
            let err = stats_from(&f).err().unwrap();
            assert!(
                matches!(err, StatsError::NameSize(n) if n == name_size),
                "{err}"
            );
        }

        let mut f = good.clone();
        f[8..12].copy_from_slice(&u32::MAX.to_ne_bytes());
        let err = stats_from(&f).err().unwrap();
        assert!(matches!(err, StatsError::TooManyDescriptors(_)), "{err}");

        // Data truncated by one word: the histogram no longer fits.
        let err = stats_from(&good[..good.len() - 8]).err().unwrap();
        assert!(err.to_string().contains("halt_hist"), "{err}");

        // A descriptor pointing far past anything readable.
        let mut f = good.clone();
        let exits_offset = HEADER_SIZE + 16 + 8;
        f[exits_offset..exits_offset + 4].copy_from_slice(&u32::MAX.to_ne_bytes());
        let err = stats_from(&f).err().unwrap();
        assert!(
            matches!(&err, StatsError::OutOfBounds { name, .. } if name == "exits"),
            "{err}"
        );

        let mut f = good.clone();
        f[HEADER_SIZE + 16 + DESC_SIZE] = 0;
        let err = stats_from(&f).err().unwrap();
        assert!(matches!(err, StatsError::BadName { index: 0 }), "{err}");
    }
}
