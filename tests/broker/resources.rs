//! Creating and closing many producers and consumers gives back what they
//! took: heap memory (live bytes, counted by this binary's allocator),
//! tokio tasks (the runtime's `num_alive_tasks`) and file descriptors
//! (`/proc/self/fd`). RSS is reported, not asserted (the allocator keeps
//! freed pages).
//!
//! Heap and descriptors are per process and the other tests of this binary
//! run alongside, so the measurement runs in a child process of this test
//! binary that runs only it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::process::Command;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Duration;

use futures::future::join_all;
use pulsar_wire::Client;
use pulsar_wire::consumer::SubscriptionType;

use crate::common::broker::{BrokerKind, TestBroker, skip_unless};
use crate::common::unique_topic;

/// Producers and consumers created and closed (each), unless
/// `PULSAR_WIRE_RESOURCE_CYCLES` says otherwise.
const CYCLES: usize = 10_000;
/// How many are open at once.
const CONCURRENT: usize = 25;
/// Marks the child process that measures.
const CHILD: &str = "PULSAR_WIRE_RESOURCES_CHILD";

/// Counts the bytes allocated and not yet freed.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is passed on to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

#[derive(Debug, Clone, Copy)]
struct Usage {
    live_bytes: isize,
    tasks: usize,
    fds: usize,
    rss_kib: u64,
}

impl Usage {
    fn now() -> Self {
        let fds = std::fs::read_dir("/proc/self/fd")
            .expect("/proc/self/fd")
            .count();
        let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm");
        let pages: u64 = statm
            .split_whitespace()
            .nth(1)
            .and_then(|n| n.parse().ok())
            .expect("resident pages");
        Self {
            live_bytes: LIVE.load(Ordering::Relaxed),
            tasks: tokio::runtime::Handle::current()
                .metrics()
                .num_alive_tasks(),
            fds,
            rss_kib: pages * 4,
        }
    }
}

#[test]
fn creating_and_closing_many_producers_and_consumers_returns_memory_tasks_and_fds() {
    if skip_unless(
        BrokerKind::Lite,
        "leaks are the client's; one broker shows them, and 20,000 handles would slow the Apache pass",
    ) {
        return;
    }
    let exe = std::env::current_exe().expect("test binary");
    let out = Command::new(exe)
        .args([
            "resources::measured_in_its_own_process",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .output()
        .expect("run the measuring child");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    eprintln!("{stderr}");
    assert!(out.status.success(), "the measurement failed");
    assert!(stdout.contains("1 passed"), "the measurement did not run");
}

#[test]
#[ignore = "runs in a process of its own, started by the test above"]
fn measured_in_its_own_process() {
    assert!(
        std::env::var_os(CHILD).is_some(),
        "run through creating_and_closing_many_producers_and_consumers_returns_memory_tasks_and_fds"
    );
    let cycles = std::env::var("PULSAR_WIRE_RESOURCE_CYCLES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(CYCLES);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(measure(cycles));
}

async fn measure(cycles: usize) {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let client = crate::common::broker::client(&broker).await;
    let topic = unique_topic("resources");
    // Warm-up: the pooled connection, lazily built statics, map capacity.
    for _ in 0..3 {
        round(&client, &topic, CONCURRENT).await;
    }
    for _ in 0..1000 {
        tokio::task::yield_now().await;
    }
    let before = Usage::now();
    let started = tokio::time::Instant::now();
    for done in (0..cycles).step_by(CONCURRENT) {
        round(&client, &topic, CONCURRENT.min(cycles - done)).await;
    }
    let elapsed = started.elapsed();
    let after = settle(&before).await;
    println!(
        "{cycles} producers and {cycles} consumers created and closed in {elapsed:.1?} \
         ({CONCURRENT} at a time); RSS {} -> {} KiB\n  before: {before:?}\n  after:  {after:?}",
        before.rss_kib, after.rss_kib
    );
    // A leak of one task or descriptor per handle would show thousands.
    assert!(
        after.tasks <= before.tasks,
        "tasks: {before:?} -> {after:?}"
    );
    assert!(after.fds <= before.fds + 2, "fds: {before:?} -> {after:?}");
    // 2 MiB over 2 x 10,000 handles: a leak of 100 bytes per handle fails.
    let grown = after.live_bytes - before.live_bytes;
    let allowed = (2 << 20) * cycles as isize / CYCLES as isize;
    assert!(
        grown <= allowed.max(256 << 10),
        "heap grew by {grown} bytes: {before:?} -> {after:?}"
    );
}

/// `n` producers and `n` consumers of `topic`, opened together, then closed.
async fn round(client: &Client, topic: &str, n: usize) {
    let producers = join_all((0..n).map(|_| client.producer(topic).create())).await;
    let consumers = join_all((0..n).map(|_| {
        client
            .consumer(topic, "resources")
            .subscription_type(SubscriptionType::Shared)
            .subscribe()
    }))
    .await;
    for p in producers {
        p.expect("producer").close().await.expect("close producer");
    }
    for c in consumers {
        c.expect("consumer").close().await.expect("close consumer");
    }
}

/// How long the task and descriptor counts may stay without falling
/// before [`settle`] gives up on them reaching the baseline.
const SETTLE_WITHOUT_PROGRESS: Duration = Duration::from_secs(30);

/// Between two looks at the counts while they settle.
const SETTLE_POLL: Duration = Duration::from_millis(10);

/// Lets the tasks of closed handles finish (the last closes, orphan closes
/// and pool watchers wait for the broker's answers): the usage once the
/// task and descriptor counts are back at `before`'s, or, if they stop
/// falling for [`SETTLE_WITHOUT_PROGRESS`], the last one seen, for the
/// caller's assertions to name.
async fn settle(before: &Usage) -> Usage {
    let mut lowest = (usize::MAX, usize::MAX);
    let mut progressed = tokio::time::Instant::now();
    loop {
        let now = Usage::now();
        if now.tasks <= before.tasks && now.fds <= before.fds + 2 {
            return now;
        }
        if now.tasks < lowest.0 || now.fds < lowest.1 {
            lowest = (lowest.0.min(now.tasks), lowest.1.min(now.fds));
            progressed = tokio::time::Instant::now();
        } else if progressed.elapsed() >= SETTLE_WITHOUT_PROGRESS {
            println!(
                "tasks and fds stopped falling at {} and {} for {SETTLE_WITHOUT_PROGRESS:?} \
                 (baseline {} and {})",
                now.tasks, now.fds, before.tasks, before.fds
            );
            return now;
        }
        tokio::time::sleep(SETTLE_POLL).await;
    }
}
