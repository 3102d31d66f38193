//! How long a raised interrupt waited for its handler, and where it was taken.
//!
//! Every handler of a real interrupt logs an entry and the interrupted RIP. The raiser (the
//! VMM's load thread, the `ipi` sender, or the guest itself in the known-answer workload)
//! writes the raise's guest TSC into `VcpuSlot::raise_tsc` only when it holds 0, then raises;
//! the handler swaps 0 in, and if it took a raise, logs `now − raise` with the running block's
//! tag. Raises that merge into one pending interrupt are timed from the first of them.

/// Entries the log holds; the VMM reads it at every block boundary.
pub const LOG_LEN: usize = 32;
/// An entry: cycles in the low 48 bits (saturated), the block tag above.
pub const TAG_SHIFT: u32 = 48;
pub const CYCLES_MAX: u64 = (1 << TAG_SHIFT) - 1;
/// The cycles of an interrupt whose raise was not timed (a LAPIC timer tick, or a raise
/// that found the last one's time not yet taken).
pub const UNTIMED: u64 = CYCLES_MAX;
const _: () = assert!(
    LOG_LEN.is_power_of_two(),
    "the guest indexes the log by a mask"
);

pub const fn cycles(entry: u64) -> u64 {
    entry & CYCLES_MAX
}
pub const fn tag(entry: u64) -> u64 {
    entry >> TAG_SHIFT
}
