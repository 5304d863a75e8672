//! The memory budget of a run: a bound on the bytes the whole process
//! holds at once, checked before a kernel allocates and after it returns.
//!
//! Meaning. The per-tensor limit ([`super::limits`]) bounds one tensor; a
//! run that keeps many of them, or makes one large tensor several times,
//! can still take the machine. The budget bounds the process's live heap:
//! - [`reserve`] is asked before a tensor whose size comes from data is
//!   allocated (every caller of [`super::limits::checked_elements`]): the
//!   tensor must fit beside what is live;
//! - [`check_live`] is asked after every kernel of the simulator: a kernel
//!   whose outputs are the size of its inputs (an `Add`, a `Relu`) is not
//!   sized beforehand, so a run that grows past the budget that way stops
//!   at the first kernel that crosses it.
//!
//! The live bytes come from [`CountingAlloc`], the global allocator the
//! binary installs (any inner allocator, mimalloc by default). It counts
//! only once [`start_counting`] is called (`run` calls it), so the graph
//! passes pay one relaxed load per allocation and nothing more; the count
//! starts from the resident set at that moment, which includes every
//! earlier allocation. A library user with an allocator of their own gets
//! the process's resident set from `/proc/self/statm` instead, read only
//! for requests of [`UNCOUNTED_CHECK_BYTES`] or more.
//!
//! The default budget leaves a quarter of the headroom to the rest of the
//! machine: three quarters of the least of the memory available
//! (`MemAvailable`), the cgroup's room (`memory.max` less
//! `memory.current`), and the address-space limit (`RLIMIT_AS`, halved:
//! virtual memory exceeds live memory), plus what the process holds when
//! first asked.
//!
//! Invariant: a run ends with [`KernelError::MemoryBudget`] before a sized
//! allocation would pass the budget; an unsized one can pass it by at most
//! the outputs of the one kernel that crossed it.

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use super::error::KernelError;

/// The bytes the process holds while counting: the resident set when
/// counting started, plus what was allocated since, less what was freed
/// (wrapping; read as signed).
static LIVE: AtomicUsize = AtomicUsize::new(0);
/// True while [`CountingAlloc`] counts.
static COUNTING: AtomicBool = AtomicBool::new(false);
/// The budget in bytes; 0 until set or first read.
static BUDGET: AtomicU64 = AtomicU64::new(0);

/// Without the counting allocator, requests smaller than this are not
/// checked (reading the resident set costs a system call).
pub const UNCOUNTED_CHECK_BYTES: u64 = 16 << 20;

/// A global allocator that counts the bytes live in the process, over any
/// other allocator `A`. The binary installs it:
/// `#[global_allocator] static A: CountingAlloc<System> = CountingAlloc(System);`
#[derive(Debug, Default)]
pub struct CountingAlloc<A>(pub A);

// SAFETY: every call is forwarded to `A` unchanged; the counter only
// records sizes, and never touches the memory.
unsafe impl<A: GlobalAlloc> GlobalAlloc for CountingAlloc<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = self.0.alloc(layout);
        if !p.is_null() {
            counted(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = self.0.alloc_zeroed(layout);
        if !p.is_null() {
            counted(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        self.0.dealloc(ptr, layout);
        if COUNTING.load(Ordering::Relaxed) {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = self.0.realloc(ptr, layout, new_size);
        if !p.is_null() && COUNTING.load(Ordering::Relaxed) {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
            LIVE.fetch_add(new_size, Ordering::Relaxed);
        }
        p
    }
}

fn counted(bytes: usize) {
    if COUNTING.load(Ordering::Relaxed) {
        LIVE.fetch_add(bytes, Ordering::Relaxed);
    }
}

/// Starts counting live bytes, from the resident set now, when the global
/// allocator is a [`CountingAlloc`]; returns whether it is. Without one,
/// [`live_bytes`] keeps reading the resident set.
pub fn start_counting() -> bool {
    if COUNTING.load(Ordering::Relaxed) {
        return true;
    }
    LIVE.store(resident_bytes().unwrap_or(0) as usize, Ordering::Relaxed);
    COUNTING.store(true, Ordering::Relaxed);
    // A probe allocation shows whether the global allocator counts.
    let before = LIVE.load(Ordering::Relaxed);
    let probe = std::hint::black_box(vec![0u8; 1 << 16]);
    let counts = LIVE.load(Ordering::Relaxed).wrapping_sub(before) >= probe.len();
    drop(probe);
    if !counts {
        COUNTING.store(false, Ordering::Relaxed);
    }
    counts
}

/// The bytes the process holds: the counting allocator's count, else the
/// resident set, else `None`.
pub fn live_bytes() -> Option<u64> {
    if COUNTING.load(Ordering::Relaxed) {
        return Some((LIVE.load(Ordering::Relaxed) as isize).max(0) as u64);
    }
    resident_bytes()
}

/// The process's resident set, from `/proc/self/statm`.
fn resident_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = text.split_whitespace().nth(1)?.parse().ok()?;
    pages.checked_mul(page_size())
}

#[cfg(unix)]
fn page_size() -> u64 {
    // SAFETY: sysconf takes a plain integer and only reads system configuration.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(size).ok().filter(|&s| s > 0).unwrap_or(4096)
}

#[cfg(not(unix))]
fn page_size() -> u64 {
    4096
}

/// The current budget in bytes (the default when none was set).
pub fn budget() -> u64 {
    match BUDGET.load(Ordering::Relaxed) {
        0 => {
            let bytes = default_budget();
            // A budget set meanwhile wins over the default.
            let _ = BUDGET.compare_exchange(0, bytes, Ordering::Relaxed, Ordering::Relaxed);
            BUDGET.load(Ordering::Relaxed)
        }
        bytes => bytes,
    }
}

/// Sets the budget (at least 1 MiB).
pub fn set_budget(bytes: u64) {
    BUDGET.store(bytes.max(1 << 20), Ordering::Relaxed);
}

/// The default budget: what the process holds now, plus three quarters of
/// the headroom the machine, the cgroup and the address-space limit give.
pub fn default_budget() -> u64 {
    let limits = [mem_available(), cgroup_room(), address_space_limit().map(|b| b / 2)];
    let room = limits.into_iter().flatten().min().unwrap_or(8 << 30);
    live_bytes().unwrap_or(0).saturating_add(room / 4 * 3).max(64 << 20)
}

/// `MemAvailable` from `/proc/meminfo`.
fn mem_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    line.split_whitespace().nth(1)?.parse::<u64>().ok()?.checked_mul(1024)
}

/// The room left in this process's cgroup (v2): `memory.max` less
/// `memory.current`; `None` without a limit.
fn cgroup_room() -> Option<u64> {
    let membership = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = membership.lines().find_map(|l| l.strip_prefix("0::"))?;
    let dir = std::path::Path::new("/sys/fs/cgroup").join(path.trim_start_matches('/'));
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).ok();
    let max: u64 = read("memory.max")?.trim().parse().ok()?; // "max" means no limit
    let current: u64 = read("memory.current").and_then(|t| t.trim().parse().ok()).unwrap_or(0);
    Some(max.saturating_sub(current))
}

/// `RLIMIT_AS` (`ulimit -v`), when one is set.
#[cfg(unix)]
fn address_space_limit() -> Option<u64> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes one rlimit struct, which `limit` is.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut limit) } == 0;
    (ok && limit.rlim_cur != libc::RLIM_INFINITY).then_some(limit.rlim_cur)
}

#[cfg(not(unix))]
fn address_space_limit() -> Option<u64> {
    None
}

/// Checks that `bytes` more, made by `op`, fit in the budget beside what
/// the process holds.
pub fn reserve(op: &str, bytes: u64) -> Result<(), KernelError> {
    if !COUNTING.load(Ordering::Relaxed) && bytes < UNCOUNTED_CHECK_BYTES {
        return Ok(());
    }
    let Some(live) = live_bytes() else { return Ok(()) };
    fits(op, bytes, live, budget())
}

/// `bytes` more beside `live` within `budget`, or the error naming `op`.
fn fits(op: &str, bytes: u64, live: u64, budget: u64) -> Result<(), KernelError> {
    if live.saturating_add(bytes) > budget {
        return Err(KernelError::MemoryBudget { op: op.to_string(), bytes, live, budget });
    }
    Ok(())
}

/// Checks, after `op` ran, that the process holds no more than the budget.
/// Only with the counting allocator: without it the check would cost a
/// system call per kernel.
pub fn check_live(op: &str) -> Result<(), KernelError> {
    if !COUNTING.load(Ordering::Relaxed) {
        return Ok(());
    }
    fits(op, 0, live_bytes().unwrap_or(0), budget())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_budget_is_positive_and_below_the_machine() {
        let budget = default_budget();
        assert!(budget >= 64 << 20, "{budget}");
        if let Some(available) = mem_available() {
            let live = live_bytes().unwrap_or(0);
            assert!(budget <= live + available, "{budget} > {live} + {available}");
        }
    }

    #[test]
    fn a_request_past_the_budget_names_the_op() {
        let err = fits("Tile", 1 << 30, 100 << 20, 1 << 30).unwrap_err();
        assert!(
            matches!(&err, KernelError::MemoryBudget { op, bytes, live, budget }
                if op == "Tile" && *bytes == 1 << 30 && *live == 100 << 20 && *budget == 1 << 30),
            "{err:?}"
        );
        assert!(fits("Tile", (1 << 30) - (100 << 20), 100 << 20, 1 << 30).is_ok(), "exactly the budget fits");
        assert!(fits("Add", 0, u64::MAX, 1 << 30).is_err(), "live bytes past the budget fail");
    }

    #[test]
    fn the_resident_set_is_read_without_the_counting_allocator() {
        // This test binary has the system allocator: counting cannot start,
        // and the count is the resident set.
        assert!(!start_counting(), "the system allocator does not count");
        let rss = live_bytes().expect("/proc/self/statm is readable on Linux");
        assert!(rss > 1 << 20, "{rss}");
    }
}
