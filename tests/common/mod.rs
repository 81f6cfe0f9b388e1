//! Support shared by the test binaries: the real test broker, unique topic
//! names, log set-up and a hang guard.

#![allow(dead_code, unreachable_pub)] // each binary uses its own subset

pub mod admin;
pub mod broker;
pub mod fake_broker;

use std::collections::hash_map::RandomState;
use std::future::Future;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A topic name no other test (nor an earlier run on a shared broker) uses.
pub fn unique_topic(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let run = RandomState::new().build_hasher().finish() & 0xffff_ffff;
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!(
        "persistent://public/default/{prefix}-{}-{run:08x}-{n}",
        std::process::id()
    )
}

/// Sends `tracing` output to the test's captured output (`RUST_LOG` filters it).
pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

/// Runs `f`, failing the test if it takes longer than a generous limit. A
/// guard against hangs only: tests never assert on time.
pub async fn guard<F: Future>(what: &str, f: F) -> F::Output {
    const LIMIT: Duration = Duration::from_secs(60);
    match tokio::time::timeout(LIMIT, f).await {
        Ok(out) => out,
        Err(_) => panic!("{what}: no outcome within {LIMIT:?} (hang guard)"),
    }
}
