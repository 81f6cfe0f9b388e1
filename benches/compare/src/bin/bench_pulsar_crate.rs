//! The `pulsar` crate 6.9.1 as a benchmark peer for `scripts/bench`: the
//! same workloads and the same one-line JSON result as `benches/compare/cpp-peer`.
//!
//! ```text
//! bench_pulsar_crate produce URL TOPIC COUNT SIZE BATCH(0|1) SYNC(0|1)
//! bench_pulsar_crate consume URL TOPIC SUBSCRIPTION COUNT
//! ```
//!
//! produce: pipelined sends with at most 1000 in flight (or, with SYNC,
//! each receipt awaited), batching with the C++ client's defaults (1000
//! messages, 128 KiB, 10 ms). consume: a Shared subscription from the
//! earliest message, each message acked individually. `seconds` and the
//! CPU times cover the measured loop only (as the cpp-peer's): produce
//! from the first send to the last receipt, consume from subscribed to the
//! last ack. Payloads carry their index in the first 8 bytes.
//!
//! The `pulsar` crate cannot consume from pulsar-lite (it rejects MESSAGE
//! frames without a checksum); `scripts/bench --broker apache` measures it.

#![allow(clippy::disallowed_methods)] // a benchmark measures wall time

use std::collections::VecDeque;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use futures::TryStreamExt;
use pulsar::consumer::{ConsumerOptions, InitialPosition};
use pulsar::producer::ProducerOptions;
use pulsar::{Consumer, Pulsar, SubType, TokioExecutor};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Most messages in flight on a pipelined run.
const WINDOW: usize = 1000;
/// How long a whole run may take (hang guard).
const DEADLINE: Duration = Duration::from_secs(300);

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("bench_pulsar_crate: error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(async {
        match tokio::time::timeout(DEADLINE, run(&args)).await {
            Ok(r) => r,
            Err(_) => Err(format!("no outcome within {DEADLINE:?}").into()),
        }
    });
    match outcome {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("bench_pulsar_crate: error: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: &[String]) -> Result<String, BoxError> {
    match args {
        [op, url, topic, count, size, batch, sync] if op == "produce" => {
            produce(url, topic, count.parse()?, size.parse()?, batch == "1", sync == "1").await
        }
        [op, url, topic, subscription, count] if op == "consume" => {
            consume(url, topic, subscription, count.parse()?).await
        }
        _ => Err(format!(
            "usage: produce URL TOPIC COUNT SIZE BATCH SYNC | consume URL TOPIC SUB COUNT; got {args:?}"
        )
        .into()),
    }
}

/// The process's user and system CPU seconds so far (every thread).
fn cpu_times() -> (f64, f64) {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `usage` is a valid, writable `rusage`; getrusage only writes it.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
    if rc != 0 {
        return (0.0, 0.0);
    }
    // SAFETY: zero-initialised, and filled in by the successful call.
    let usage = unsafe { usage.assume_init() };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(usage.ru_utime), secs(usage.ru_stime))
}

/// The result line, in the cpp-peer's format.
fn line(op: &str, count: u64, bytes: u64, t0: Instant, cpu0: (f64, f64)) -> String {
    let seconds = t0.elapsed().as_secs_f64();
    let cpu1 = cpu_times();
    format!(
        "{{\"client\":\"pulsar\",\"op\":\"{op}\",\"count\":{count},\"bytes\":{bytes},\
         \"seconds\":{seconds:.6},\"msgs_per_sec\":{:.1},\"cpu_user_s\":{:.6},\"cpu_sys_s\":{:.6}}}",
        count as f64 / seconds,
        cpu1.0 - cpu0.0,
        cpu1.1 - cpu0.1
    )
}

/// Message `i`'s payload: `size` bytes, the index in the first (up to) 8.
fn payload(i: u64, size: usize) -> Vec<u8> {
    let mut p = vec![0x5a; size];
    let n = size.min(8);
    p[..n].copy_from_slice(&i.to_le_bytes()[..n]);
    p
}

async fn produce(
    url: &str,
    topic: &str,
    count: u64,
    size: usize,
    batch: bool,
    sync: bool,
) -> Result<String, BoxError> {
    let client: Pulsar<TokioExecutor> = Pulsar::builder(url, TokioExecutor).build().await?;
    let options = ProducerOptions {
        batch_size: batch.then_some(1000),
        batch_byte_size: batch.then_some(128 * 1024),
        batch_timeout: batch.then_some(Duration::from_millis(10)),
        block_queue_if_full: true,
        ..Default::default()
    };
    let mut producer = client
        .producer()
        .with_topic(topic)
        .with_options(options)
        .build()
        .await?;
    let (cpu0, t0) = (cpu_times(), Instant::now());
    if sync {
        for i in 0..count {
            producer.send_non_blocking(payload(i, size)).await?.await?;
        }
    } else {
        let mut in_flight = VecDeque::with_capacity(WINDOW);
        for i in 0..count {
            if in_flight.len() == WINDOW {
                let receipt: pulsar::producer::SendFuture =
                    in_flight.pop_front().ok_or("empty window")?;
                receipt.await?;
            }
            in_flight.push_back(producer.send_non_blocking(payload(i, size)).await?);
        }
        producer.send_batch().await?;
        for receipt in in_flight {
            receipt.await?;
        }
    }
    let result = line("produce", count, count * size as u64, t0, cpu0);
    producer.close().await?;
    Ok(result)
}

async fn consume(
    url: &str,
    topic: &str,
    subscription: &str,
    count: u64,
) -> Result<String, BoxError> {
    let client: Pulsar<TokioExecutor> = Pulsar::builder(url, TokioExecutor).build().await?;
    let mut consumer: Consumer<Vec<u8>, TokioExecutor> = client
        .consumer()
        .with_topic(topic)
        .with_subscription_type(SubType::Shared)
        .with_subscription(subscription)
        .with_options(ConsumerOptions::default().with_initial_position(InitialPosition::Earliest))
        .build()
        .await?;
    let (cpu0, t0) = (cpu_times(), Instant::now());
    let (mut got, mut bytes) = (0u64, 0u64);
    while got < count {
        let Some(msg) = consumer.try_next().await? else {
            return Err(format!("the stream ended after {got} of {count} messages").into());
        };
        bytes += msg.payload.data.len() as u64;
        consumer.ack(&msg).await?;
        got += 1;
    }
    let result = line("consume", count, bytes, t0, cpu0);
    consumer.close().await?;
    Ok(result)
}
