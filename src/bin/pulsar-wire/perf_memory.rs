//! What `perf idle` and `perf backlog` read about this process: live heap
//! bytes (a counting global allocator), resident memory, CPU time and
//! context switches.
//!
//! The allocator counts only once [`count_allocations`] has switched it
//! on, before the runtime starts, for the subcommands that read it: every
//! other subcommand pays one relaxed load per allocation.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

/// The system allocator, counting live bytes and allocations once on.
#[derive(Debug)]
pub(crate) struct Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);
static LIVE_BYTES: AtomicI64 = AtomicI64::new(0);
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

fn grew(bytes: usize) {
    if COUNTING.load(Ordering::Relaxed) {
        LIVE_BYTES.fetch_add(i64::try_from(bytes).unwrap_or(i64::MAX), Ordering::Relaxed);
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    }
}

fn shrank(bytes: usize) {
    if COUNTING.load(Ordering::Relaxed) {
        LIVE_BYTES.fetch_sub(i64::try_from(bytes).unwrap_or(i64::MAX), Ordering::Relaxed);
    }
}

// SAFETY: every call goes to `System` with the caller's arguments
// unchanged; the counters are only bookkeeping beside it.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc`, passed on.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            grew(layout.size());
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc_zeroed`, passed on.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            grew(layout.size());
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract for `dealloc`, passed on.
        unsafe { System.dealloc(ptr, layout) };
        shrank(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract for `realloc`, passed on.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            // Counted as one allocation of the new size in place of the old.
            shrank(layout.size());
            grew(new_size);
        }
        new
    }
}

/// Switches the counting on, for the rest of the process.
pub(crate) fn count_allocations() {
    COUNTING.store(true, Ordering::Relaxed);
}

/// One reading of this process's memory and CPU.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Reading {
    /// Live heap bytes the allocator counted (requested sizes, without
    /// the allocator's own overhead).
    pub(crate) heap: i64,
    /// Allocations made since counting started.
    pub(crate) allocations: u64,
    /// Resident set size in bytes (0 where /proc is not there).
    pub(crate) rss: u64,
    /// User and system CPU seconds.
    pub(crate) cpu_user: f64,
    pub(crate) cpu_sys: f64,
    /// Voluntary context switches (a thread that blocked, then woke up)
    /// and involuntary ones.
    pub(crate) woke: i64,
    pub(crate) preempted: i64,
}

impl Reading {
    /// Reads them now.
    pub(crate) fn now() -> Self {
        let usage = rusage();
        Self {
            heap: LIVE_BYTES.load(Ordering::Relaxed),
            allocations: ALLOCATIONS.load(Ordering::Relaxed),
            rss: resident_bytes(),
            cpu_user: usage.map_or(0.0, |u| seconds(u.ru_utime)),
            cpu_sys: usage.map_or(0.0, |u| seconds(u.ru_stime)),
            woke: usage.map_or(0, |u| u.ru_nvcsw),
            preempted: usage.map_or(0, |u| u.ru_nivcsw),
        }
    }

    /// CPU seconds (user + system) from `earlier` to this reading.
    pub(crate) fn cpu_since(&self, earlier: &Self) -> f64 {
        (self.cpu_user - earlier.cpu_user) + (self.cpu_sys - earlier.cpu_sys)
    }
}

fn seconds(t: libc::timeval) -> f64 {
    t.tv_sec as f64 + t.tv_usec as f64 / 1e6
}

fn rusage() -> Option<libc::rusage> {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `usage` is a valid, writable `rusage`; getrusage only writes it.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
    // SAFETY: zero-initialised, and filled in by the successful call.
    (rc == 0).then(|| unsafe { usage.assume_init() })
}

/// The resident set size from /proc/self/statm (Linux), else 0.
fn resident_bytes() -> u64 {
    let Ok(statm) = std::fs::read_to_string("/proc/self/statm") else {
        return 0;
    };
    // SAFETY: sysconf only reads a configuration value.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * u64::try_from(page).unwrap_or(4096)
}

/// `bytes` per `each`, as a JSON number (null for no handles).
pub(crate) fn per(bytes: i64, each: u64) -> serde_json::Value {
    if each == 0 {
        serde_json::Value::Null
    } else {
        (bytes as f64 / each as f64).round().into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reading_sees_this_process() {
        let r = Reading::now();
        assert!(r.rss > 0, "a running process has resident pages");
        assert!(r.cpu_user + r.cpu_sys >= 0.0);
        assert_eq!(per(3000, 3), serde_json::json!(1000.0));
        assert_eq!(per(1, 0), serde_json::Value::Null);
    }

    #[test]
    fn the_allocator_counts_live_bytes_once_on() {
        count_allocations();
        let before = Reading::now();
        let block = vec![1u8; 64 << 20];
        let held = Reading::now();
        drop(block);
        let after = Reading::now();
        // Other tests allocate meanwhile, a few KiB at most.
        let grown = held.heap - before.heap;
        assert!((63 << 20..65 << 20).contains(&grown), "{grown}");
        let freed = held.heap - after.heap;
        assert!((63 << 20..65 << 20).contains(&freed), "{freed}");
        assert!(held.allocations > before.allocations);
    }
}
