//! The ack-timeout tracker at 1,000,000 tracked messages: time per
//! insert + remove, and heap bytes per tracked message.
//!
//! Bytes are measured with a counting global allocator (live heap bytes
//! before and after filling the tracker), and cross-checked against the
//! tracker's own capacity-based `allocated_bytes()`. A `HashMap` keyed by
//! id runs beside it as a reference point.
//!
//! Run: `cargo bench --bench unacked`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::HashMap;
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use pulsar_wire::MessageId;
use pulsar_wire::consumer::UnackedTracker;

/// Counts live heap bytes.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call forwards to `System` with the caller's arguments; the
// counter only observes sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded as is.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded as is.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            LIVE.fetch_add(new_size, Ordering::Relaxed);
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        new
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const TRACKED: u64 = 1_000_000;

/// Message `n`: entries of a partition, 65,536 to a ledger.
fn id(n: u64) -> MessageId {
    MessageId::new(7 + (n >> 16), n & 0xFFFF).with_partition(3)
}

/// Some instant to count from; nothing here depends on the wall clock.
#[allow(clippy::disallowed_methods)] // benches have no tokio clock; only an origin is needed
fn origin() -> Instant {
    Instant::now()
}

fn at(t0: Instant, n: u64) -> Instant {
    t0 + Duration::from_micros(n)
}

fn tracker() -> UnackedTracker {
    UnackedTracker::new(Duration::from_secs(30), Duration::from_millis(500))
}

/// A tracker holding `TRACKED` messages, one per microsecond from `t0`.
fn filled(t0: Instant) -> UnackedTracker {
    let mut tracker = tracker();
    for n in 0..TRACKED {
        tracker.insert(at(t0, n), id(n));
    }
    tracker
}

fn report_memory(t0: Instant) {
    let before = LIVE.load(Ordering::Relaxed);
    let tracker = filled(t0);
    let measured = LIVE.load(Ordering::Relaxed) - before;
    let computed = tracker.allocated_bytes();
    println!(
        "UnackedTracker at {TRACKED} tracked: {:.1} B/message measured by the allocator, \
         {:.1} B/message from capacities",
        measured as f64 / TRACKED as f64,
        computed as f64 / TRACKED as f64,
    );
    drop(tracker);
    let before = LIVE.load(Ordering::Relaxed);
    let map: HashMap<MessageId, Instant> = (0..TRACKED).map(|n| (id(n), at(t0, n))).collect();
    let measured = LIVE.load(Ordering::Relaxed) - before;
    println!(
        "HashMap<MessageId, Instant> reference: {:.1} B/message",
        measured as f64 / TRACKED as f64
    );
    drop(map);
}

/// This thread's time on a CPU, in ns (Linux `schedstat`): unlike wall
/// time it leaves out time spent waiting while other processes run.
fn cpu_nanos() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    stat.split_whitespace().next()?.parse().ok()
}

/// Times in-order insert+remove pairs at several sizes, in wall and CPU
/// time, for figures that hold up on a busy machine and show what the
/// caches do.
fn report_cpu_time(t0: Instant) {
    const OPS: u64 = 4_000_000;
    for tracked in [10_000, 100_000, TRACKED] {
        let mut tracker = tracker();
        for n in 0..tracked {
            tracker.insert(at(t0, n), id(n));
        }
        let (wall, cpu) = (origin(), cpu_nanos());
        for next in tracked..tracked + OPS {
            tracker.insert(at(t0, next), id(next));
            black_box(tracker.remove(id(next - tracked)));
        }
        let wall = wall.elapsed().as_nanos() as f64 / OPS as f64;
        let cpu = cpu
            .zip(cpu_nanos())
            .map_or(f64::NAN, |(start, end)| (end - start) as f64 / OPS as f64);
        println!(
            "insert+remove in order at {tracked} tracked: {wall:.0} ns wall, {cpu:.0} ns CPU per message"
        );
    }
}

fn bench(c: &mut Criterion) {
    let t0 = origin();
    report_memory(t0);
    report_cpu_time(t0);
    let mut group = c.benchmark_group("unacked_at_1M");

    // Acks in delivery order: the oldest tracked message is removed as a
    // new one is handed out.
    let mut tracker = filled(t0);
    let mut next = TRACKED;
    group.bench_function("insert+remove, acks in order", |b| {
        b.iter(|| {
            tracker.insert(at(t0, next), id(next));
            black_box(tracker.remove(id(next - TRACKED)));
            next += 1;
        });
    });
    drop(tracker);

    // Acks in random order: a random tracked message is removed.
    let mut tracker = filled(t0);
    let mut live: Vec<u64> = (0..TRACKED).collect();
    let mut next = TRACKED;
    let mut rng = 0x9E37_79B9_7F4A_7C15_u64;
    group.bench_function("insert+remove, acks in random order", |b| {
        b.iter(|| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let slot = (rng % TRACKED) as usize;
            black_box(tracker.remove(id(live[slot])));
            tracker.insert(at(t0, next), id(next));
            live[slot] = next;
            next += 1;
        });
    });
    drop(tracker);

    // The reference: a HashMap of deadlines (which cannot expire without a scan).
    let mut map: HashMap<MessageId, Instant> = (0..TRACKED).map(|n| (id(n), at(t0, n))).collect();
    let mut next = TRACKED;
    group.bench_function("HashMap reference, acks in order", |b| {
        b.iter(|| {
            map.insert(id(next), at(t0, next));
            black_box(map.remove(&id(next - TRACKED)));
            next += 1;
        });
    });
    drop(map);
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
