//! End-to-end produce throughput: pulsar-wire, the `pulsar` crate 6.9.1 and
//! the official C++ client, side by side in one run against one broker.
//!
//! Run: `cargo bench --bench produce` (needs `scripts/setup`; a few minutes).
//!
//! The bench starts one pulsar-lite through the test harness, then runs
//! every client in a process of its own, so each one's CPU time is its own:
//! the two Rust clients in a child process of this binary (re-executed with
//! [`CHILD_ARG`]), the C++ client as `bench/cpp-peer` (built by
//! `scripts/build-cpp-peer`). Every child reports one JSON line with the wall
//! time and `getrusage(RUSAGE_SELF)` CPU of its measured loop only (from the
//! first send until every receipt is in; creating and closing the client are
//! not timed), the same method for all three.
//!
//! Workloads: (a) 100 B, batching on, pipelined; (b) 1 KiB, batching on,
//! pipelined; (c) 1 KiB, unbatched, each receipt awaited before the next
//! send (p50/p99 latency). Pipelined sends keep at most [`WINDOW`] messages
//! in flight (the C++ client's and pulsar-wire's default pending bound;
//! the Rust loops await the oldest receipt when the window is full).
//! Batching uses the C++ client's defaults in all three: 1000 messages,
//! 128 KiB, 10 ms. A fresh topic per run; the clients take turns within
//! each workload, starting with a different client every round; the table
//! shows medians over the rounds.
//!
//! Under `cargo test --all-targets` (no `--bench` argument) it prints that
//! it is skipped and exits at once, without starting anything.
//!
//! Environment: `PRODUCE_BENCH_ROUNDS` (default 3), `PRODUCE_BENCH_SCALE`
//! (a factor on the message counts, default 1).

#![allow(clippy::disallowed_methods)] // a benchmark measures wall time

#[path = "../tests/common/mod.rs"]
mod common;

use std::collections::VecDeque;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type Result<T, E = BoxError> = std::result::Result<T, E>;

/// The first argument that makes this binary a single-client child.
const CHILD_ARG: &str = "__produce-bench-child";
/// Most messages in flight on a pipelined run.
const WINDOW: usize = 1000;
/// Batching settings shared by every client (the C++ client's defaults).
const BATCH_MAX_MESSAGES: u32 = 1000;
const BATCH_MAX_BYTES: usize = 128 * 1024;
const BATCH_MAX_DELAY: Duration = Duration::from_millis(10);
/// How long one client run may take before it is killed (hang guard).
const RUN_DEADLINE: Duration = Duration::from_secs(120);
/// The child's own limit, below the parent's so it reports first.
const CHILD_DEADLINE: Duration = Duration::from_secs(100);
/// The send timeout each client is given.
const SEND_TIMEOUT_SECS: u64 = 60;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(CHILD_ARG) {
        return match child::run(&args[2..]) {
            Ok(line) => {
                println!("{line}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("produce bench child: error: {e}");
                ExitCode::FAILURE
            }
        };
    }
    if !args.iter().any(|a| a == "--bench") {
        println!(
            "produce bench: skipped (not run with --bench; it starts a broker and takes \
             minutes: `cargo bench --bench produce`)"
        );
        return ExitCode::SUCCESS;
    }
    match parent::run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("produce bench: error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// One workload of the comparison.
#[derive(Debug, Clone, Copy)]
struct Workload {
    name: &'static str,
    count: u64,
    size: usize,
    batch: bool,
    /// Each receipt awaited before the next send (latency).
    sync: bool,
}

const WORKLOADS: [Workload; 3] = [
    Workload {
        name: "100 B, batched, pipelined",
        count: 100_000,
        size: 100,
        batch: true,
        sync: false,
    },
    Workload {
        name: "1 KiB, batched, pipelined",
        count: 100_000,
        size: 1024,
        batch: true,
        sync: false,
    },
    Workload {
        name: "1 KiB, unbatched, sync",
        count: 10_000,
        size: 1024,
        batch: false,
        sync: true,
    },
];

/// The clients compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ClientKind {
    Wire,
    PulsarCrate,
    Cpp,
}

impl ClientKind {
    const ALL: [Self; 3] = [Self::Wire, Self::PulsarCrate, Self::Cpp];

    fn label(self) -> &'static str {
        match self {
            Self::Wire => "pulsar-wire",
            Self::PulsarCrate => "pulsar crate 6.9.1",
            Self::Cpp => "official C++ 3.13.0",
        }
    }

    fn arg(self) -> &'static str {
        match self {
            Self::Wire => "wire",
            Self::PulsarCrate => "pulsar",
            Self::Cpp => "cpp",
        }
    }

    fn from_arg(s: &str) -> Result<Self> {
        match s {
            "wire" => Ok(Self::Wire),
            "pulsar" => Ok(Self::PulsarCrate),
            other => Err(format!("unknown client {other:?}").into()),
        }
    }
}

/// What one client run measured.
#[derive(Debug, Clone, Copy)]
struct Sample {
    msgs_per_sec: f64,
    cpu_s: f64,
    p50_us: Option<f64>,
    p99_us: Option<f64>,
}

/// The result line every child prints, in the cpp-peer's format.
fn report_line(
    client: &str,
    count: u64,
    size: usize,
    seconds: f64,
    cpu: (f64, f64),
    latency: Option<(f64, f64)>,
) -> String {
    let mut line = format!(
        "{{\"client\":\"{client}\",\"op\":\"produce\",\"count\":{count},\"bytes\":{},\
         \"seconds\":{seconds:.6},\"msgs_per_sec\":{:.1},\"cpu_user_s\":{:.6},\"cpu_sys_s\":{:.6}",
        count * size as u64,
        count as f64 / seconds,
        cpu.0,
        cpu.1
    );
    if let Some((p50, p99)) = latency {
        line.push_str(&format!(",\"lat_p50_us\":{p50:.1},\"lat_p99_us\":{p99:.1}"));
    }
    line.push('}');
    line
}

/// The process's user and system CPU seconds so far (every thread).
fn cpu_times() -> (f64, f64) {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `usage` is a valid, writable `rusage`; getrusage only writes it.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
    assert_eq!(rc, 0, "getrusage failed");
    // SAFETY: zero-initialised and filled in by a successful getrusage.
    let usage = unsafe { usage.assume_init() };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(usage.ru_utime), secs(usage.ru_stime))
}

/// Nearest-rank percentile of sorted latencies, in µs (as the cpp-peer does).
fn percentile_us(sorted: &[Duration], p: f64) -> f64 {
    let n = sorted.len();
    let rank = ((p / 100.0) * n as f64).ceil().clamp(1.0, n as f64) as usize;
    sorted[rank - 1].as_secs_f64() * 1e6
}

/// Message `i`'s payload: `size` bytes, the index in the first (up to) 8.
fn payload(i: u64, size: usize) -> Vec<u8> {
    let mut p = vec![0x5a; size];
    let n = size.min(8);
    p[..n].copy_from_slice(&i.to_le_bytes()[..n]);
    p
}

/// A single Rust client's run, in a child process.
mod child {
    use super::*;

    use pulsar_wire::Client;
    use pulsar_wire::producer::ProducerMessage;

    /// Args: CLIENT URL TOPIC COUNT SIZE BATCH(0|1) SYNC(0|1).
    pub(super) fn run(args: &[String]) -> Result<String> {
        let [client, url, topic, count, size, batch, sync] = args else {
            return Err(format!("expected 7 arguments, got {args:?}").into());
        };
        let client = ClientKind::from_arg(client)?;
        let w = Workload {
            name: "",
            count: count.parse()?,
            size: size.parse()?,
            batch: batch == "1",
            sync: sync == "1",
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?;
        runtime.block_on(async {
            let work = async {
                match client {
                    ClientKind::Wire => wire(url, topic, w).await,
                    ClientKind::PulsarCrate => pulsar_crate(url, topic, w).await,
                    ClientKind::Cpp => unreachable!("the C++ client runs as cpp-peer"),
                }
            };
            tokio::time::timeout(CHILD_DEADLINE, work)
                .await
                .map_err(|_| format!("no outcome within {CHILD_DEADLINE:?} (hang guard)"))?
        })
    }

    /// Measures `body` (the send loop, receipts included) like the cpp-peer.
    async fn measure<F, Fut>(name: &str, w: Workload, body: F) -> Result<String>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Vec<Duration>>>,
    {
        let cpu0 = cpu_times();
        let t0 = Instant::now();
        let mut latencies = body().await?;
        let seconds = t0.elapsed().as_secs_f64();
        let cpu1 = cpu_times();
        let latency = (!latencies.is_empty()).then(|| {
            latencies.sort_unstable();
            (
                percentile_us(&latencies, 50.0),
                percentile_us(&latencies, 99.0),
            )
        });
        Ok(report_line(
            name,
            w.count,
            w.size,
            seconds,
            (cpu1.0 - cpu0.0, cpu1.1 - cpu0.1),
            latency,
        ))
    }

    async fn wire(url: &str, topic: &str, w: Workload) -> Result<String> {
        let client = Client::builder().service_url(url).build().await?;
        let producer = client
            .producer(topic)
            .batching(w.batch)
            .batching_max_messages(BATCH_MAX_MESSAGES as usize)
            .batching_max_bytes(BATCH_MAX_BYTES)
            .batching_max_delay(BATCH_MAX_DELAY)
            .max_pending_messages(WINDOW)
            .send_timeout(Duration::from_secs(SEND_TIMEOUT_SECS))
            .create()
            .await?;
        let line = measure("wire", w, || async {
            let mut latencies = Vec::new();
            if w.sync {
                latencies.reserve(w.count as usize);
                for i in 0..w.count {
                    let t = Instant::now();
                    let msg = ProducerMessage::new(payload(i, w.size));
                    producer.send(msg).await?.await?;
                    latencies.push(t.elapsed());
                }
            } else {
                let mut in_flight = VecDeque::with_capacity(WINDOW);
                for i in 0..w.count {
                    if in_flight.len() == WINDOW {
                        let receipt: pulsar_wire::producer::SendReceipt =
                            in_flight.pop_front().expect("a full window");
                        receipt.await?;
                    }
                    let msg = ProducerMessage::new(payload(i, w.size));
                    in_flight.push_back(producer.send(msg).await?);
                }
                producer.flush().await?;
                for receipt in in_flight {
                    receipt.await?;
                }
            }
            Ok(latencies)
        })
        .await?;
        producer.close().await?;
        client.close().await;
        Ok(line)
    }

    async fn pulsar_crate(url: &str, topic: &str, w: Workload) -> Result<String> {
        use pulsar::{Pulsar, TokioExecutor, producer::ProducerOptions};

        let client: Pulsar<TokioExecutor> = Pulsar::builder(url, TokioExecutor).build().await?;
        let options = if w.batch {
            ProducerOptions {
                batch_size: Some(BATCH_MAX_MESSAGES),
                batch_byte_size: Some(BATCH_MAX_BYTES),
                batch_timeout: Some(BATCH_MAX_DELAY),
                block_queue_if_full: true,
                ..Default::default()
            }
        } else {
            ProducerOptions {
                block_queue_if_full: true,
                ..Default::default()
            }
        };
        let mut producer = client
            .producer()
            .with_topic(topic)
            .with_options(options)
            .build()
            .await?;
        let line = measure("pulsar", w, || async {
            let mut latencies = Vec::new();
            if w.sync {
                latencies.reserve(w.count as usize);
                for i in 0..w.count {
                    let t = Instant::now();
                    producer
                        .send_non_blocking(payload(i, w.size))
                        .await?
                        .await?;
                    latencies.push(t.elapsed());
                }
            } else {
                let mut in_flight = VecDeque::with_capacity(WINDOW);
                for i in 0..w.count {
                    if in_flight.len() == WINDOW {
                        let receipt: pulsar::producer::SendFuture =
                            in_flight.pop_front().expect("a full window");
                        receipt.await?;
                    }
                    in_flight.push_back(producer.send_non_blocking(payload(i, w.size)).await?);
                }
                producer.send_batch().await?;
                for receipt in in_flight {
                    receipt.await?;
                }
            }
            Ok(latencies)
        })
        .await?;
        producer.close().await?;
        Ok(line)
    }
}

/// The driver: broker, children, table.
mod parent {
    use super::*;

    pub(super) fn run() -> Result<()> {
        let rounds: usize = env_or("PRODUCE_BENCH_ROUNDS", 3)?;
        let scale: f64 = env_or("PRODUCE_BENCH_SCALE", 1.0)?;
        if rounds == 0 || scale <= 0.0 {
            return Err("PRODUCE_BENCH_ROUNDS and PRODUCE_BENCH_SCALE must be positive".into());
        }
        let workloads = WORKLOADS.map(|w| Workload {
            count: ((w.count as f64 * scale) as u64).max(1),
            ..w
        });
        let cpp_peer = build_cpp_peer()?;
        let load_before = loadavg();

        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        // Started on the harness's terms, killed (and its data removed) on drop.
        let broker = runtime.block_on(common::broker::TestBroker::start());
        let url = broker.service_url();
        eprintln!(
            "produce bench: broker {url} ({:?}), {rounds} rounds",
            broker.kind()
        );

        // samples[workload][client] over the rounds.
        let mut samples = vec![vec![Vec::<Sample>::new(); 3]; workloads.len()];
        let mut failures = Vec::new();
        for round in 0..rounds {
            for (wi, w) in workloads.iter().enumerate() {
                for k in 0..3 {
                    let ci = (k + round + wi) % 3;
                    let client = ClientKind::ALL[ci];
                    let topic = common::unique_topic(&format!("bench-{}", client.arg()));
                    match run_one(&cpp_peer, client, &url, &topic, *w) {
                        Ok(s) => {
                            eprintln!(
                                "  round {} | {} | {}: {:.0} msgs/s, {:.3} CPU s{}",
                                round + 1,
                                w.name,
                                client.label(),
                                s.msgs_per_sec,
                                s.cpu_s,
                                s.p50_us
                                    .zip(s.p99_us)
                                    .map(|(a, b)| format!(", p50 {a:.0} µs, p99 {b:.0} µs"))
                                    .unwrap_or_default()
                            );
                            samples[wi][ci].push(s);
                        }
                        Err(e) => {
                            let what = format!(
                                "round {} | {} | {}: {e}",
                                round + 1,
                                w.name,
                                client.label()
                            );
                            eprintln!("  FAILED {what}");
                            failures.push(what);
                        }
                    }
                }
            }
        }
        drop(broker);
        let load_after = loadavg();

        print_tables(&workloads, &samples, rounds, &load_before, &load_after);
        if !failures.is_empty() {
            println!("\nFailed runs ({}):", failures.len());
            for f in &failures {
                println!("- {f}");
            }
        }
        if samples.iter().flatten().any(Vec::is_empty) {
            return Err("some client had no successful run of some workload".into());
        }
        Ok(())
    }

    fn env_or<T: std::str::FromStr>(name: &str, default: T) -> Result<T> {
        match std::env::var(name) {
            Ok(v) => v
                .parse()
                .map_err(|_| format!("{name}={v:?} is not a valid value").into()),
            Err(_) => Ok(default),
        }
    }

    fn loadavg() -> String {
        std::fs::read_to_string("/proc/loadavg")
            .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
            .unwrap_or_else(|_| "?".into())
    }

    /// Builds (or finds up to date) the native C++ peer; returns its path.
    fn build_cpp_peer() -> Result<PathBuf> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let out = Command::new(root.join("scripts/build-cpp-peer"))
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run scripts/build-cpp-peer: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "scripts/build-cpp-peer failed ({}); run scripts/setup first:\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            )
            .into());
        }
        let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if !path.is_file() {
            return Err(format!("cpp-peer not found at {}", path.display()).into());
        }
        Ok(path)
    }

    /// Kills and reaps the child when dropped, whatever happened.
    struct Reaped(Child);

    impl Drop for Reaped {
        fn drop(&mut self) {
            if let Ok(None) = self.0.try_wait() {
                let _ = self.0.kill();
            }
            let _ = self.0.wait();
        }
    }

    /// Runs one client on one workload in a process of its own.
    fn run_one(
        cpp_peer: &Path,
        client: ClientKind,
        url: &str,
        topic: &str,
        w: Workload,
    ) -> Result<Sample> {
        let mut cmd = if client == ClientKind::Cpp {
            let mut cmd = Command::new(cpp_peer);
            cmd.args(["produce", "--url", url, "--topic", topic]);
            cmd.args([
                "--count",
                &w.count.to_string(),
                "--size",
                &w.size.to_string(),
            ]);
            cmd.args(["--max-pending", &WINDOW.to_string()]);
            cmd.args(["--timeout", &SEND_TIMEOUT_SECS.to_string()]);
            if w.batch {
                cmd.args([
                    "--batch",
                    "--batch-max-messages",
                    &BATCH_MAX_MESSAGES.to_string(),
                    "--batch-max-delay-ms",
                    &BATCH_MAX_DELAY.as_millis().to_string(),
                ]);
            }
            if w.sync {
                cmd.arg("--sync");
            }
            cmd
        } else {
            let mut cmd = Command::new(std::env::current_exe()?);
            cmd.arg(CHILD_ARG);
            cmd.args([client.arg(), url, topic]);
            cmd.args([w.count.to_string(), w.size.to_string()]);
            cmd.args([
                if w.batch { "1" } else { "0" },
                if w.sync { "1" } else { "0" },
            ]);
            cmd
        };
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = Reaped(
            cmd.spawn()
                .map_err(|e| format!("cannot start {:?}: {e}", cmd.get_program()))?,
        );
        let stdout = drain(child.0.stdout.take().expect("piped stdout"));
        let stderr = drain(child.0.stderr.take().expect("piped stderr"));

        let started = Instant::now();
        let status = loop {
            if let Some(status) = child.0.try_wait()? {
                break status;
            }
            if started.elapsed() > RUN_DEADLINE {
                drop(child);
                return Err(format!(
                    "killed after {RUN_DEADLINE:?} (hang guard); stderr: {}",
                    tail(&stderr.join().unwrap_or_default())
                )
                .into());
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let stdout = stdout.join().unwrap_or_default();
        let stderr = stderr.join().unwrap_or_default();
        if !status.success() {
            return Err(format!("exited with {status}; stderr: {}", tail(&stderr)).into());
        }
        let line = stdout
            .lines()
            .rev()
            .find(|l| l.trim_start().starts_with('{'))
            .ok_or_else(|| format!("no JSON line on stdout; stderr: {}", tail(&stderr)))?;
        parse_sample(line)
    }

    fn drain<R: Read + Send + 'static>(mut from: R) -> std::thread::JoinHandle<String> {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = from.read_to_end(&mut buf);
            String::from_utf8_lossy(&buf).into_owned()
        })
    }

    fn tail(s: &str) -> String {
        let lines: Vec<&str> = s.lines().collect();
        let from = lines.len().saturating_sub(10);
        let t = lines[from..].join("\n");
        if t.is_empty() { "(empty)".into() } else { t }
    }

    fn parse_sample(line: &str) -> Result<Sample> {
        let v: serde_json::Value =
            serde_json::from_str(line).map_err(|e| format!("bad JSON {line:?}: {e}"))?;
        let num = |k: &str| v.get(k).and_then(serde_json::Value::as_f64);
        let need = |k: &str| num(k).ok_or_else(|| format!("no {k:?} in {line:?}"));
        Ok(Sample {
            msgs_per_sec: need("msgs_per_sec")?,
            cpu_s: need("cpu_user_s")? + need("cpu_sys_s")?,
            p50_us: num("lat_p50_us"),
            p99_us: num("lat_p99_us"),
        })
    }

    fn median(mut xs: Vec<f64>) -> Option<f64> {
        if xs.is_empty() {
            return None;
        }
        xs.sort_by(f64::total_cmp);
        let n = xs.len();
        Some(if n % 2 == 1 {
            xs[n / 2]
        } else {
            (xs[n / 2 - 1] + xs[n / 2]) / 2.0
        })
    }

    /// Medians of one client on one workload.
    #[derive(Debug, Clone, Copy)]
    struct Medians {
        msgs_per_sec: Option<f64>,
        cpu_s: Option<f64>,
        p50_us: Option<f64>,
        p99_us: Option<f64>,
    }

    fn medians(samples: &[Sample]) -> Medians {
        let of = |f: fn(&Sample) -> Option<f64>| median(samples.iter().filter_map(f).collect());
        Medians {
            msgs_per_sec: of(|s| Some(s.msgs_per_sec)),
            cpu_s: of(|s| Some(s.cpu_s)),
            p50_us: of(|s| s.p50_us),
            p99_us: of(|s| s.p99_us),
        }
    }

    fn fmt(x: Option<f64>, decimals: usize) -> String {
        x.map_or_else(|| "—".into(), |x| format!("{x:.decimals$}"))
    }

    fn ratio(a: Option<f64>, b: Option<f64>) -> String {
        match (a, b) {
            (Some(a), Some(b)) if b > 0.0 => format!("{:.2}x", a / b),
            _ => "—".into(),
        }
    }

    fn print_tables(
        workloads: &[Workload],
        samples: &[Vec<Vec<Sample>>],
        rounds: usize,
        load_before: &str,
        load_after: &str,
    ) {
        println!(
            "\n## Produce throughput, pulsar-lite on one machine \
             (medians of {rounds} rounds; load average {load_before} before, {load_after} after)\n"
        );
        println!(
            "| workload | messages | client | msgs/s | client CPU s | CPU µs/msg | p50 µs | p99 µs | runs |"
        );
        println!("|---|---:|---|---:|---:|---:|---:|---:|---:|");
        let mut all = Vec::new();
        for (wi, w) in workloads.iter().enumerate() {
            let row: Vec<Medians> = (0..3).map(|ci| medians(&samples[wi][ci])).collect();
            for (ci, client) in ClientKind::ALL.iter().enumerate() {
                let m = row[ci];
                println!(
                    "| {} | {} | {} | {} | {} | {} | {} | {} | {}/{rounds} |",
                    w.name,
                    w.count,
                    client.label(),
                    fmt(m.msgs_per_sec, 0),
                    fmt(m.cpu_s, 3),
                    fmt(m.cpu_s.map(|c| c * 1e6 / w.count as f64), 2),
                    fmt(m.p50_us, 0),
                    fmt(m.p99_us, 0),
                    samples[wi][ci].len(),
                );
            }
            all.push(row);
        }

        println!(
            "\n### Ratios: pulsar-wire ÷ official C++ and pulsar-wire ÷ `pulsar` crate \
             (throughput: higher is better for pulsar-wire; CPU and latency: lower is better)\n"
        );
        println!(
            "| workload | msgs/s ÷ C++ | msgs/s ÷ pulsar crate | CPU/msg ÷ C++ | CPU/msg ÷ pulsar crate | p50 ÷ C++ | p50 ÷ pulsar crate |"
        );
        println!("|---|---:|---:|---:|---:|---:|---:|");
        for (w, row) in workloads.iter().zip(&all) {
            let [wire, pulsar, cpp] = [row[0], row[1], row[2]];
            let lat = |a: Medians, b: Medians| {
                if w.sync {
                    ratio(a.p50_us, b.p50_us)
                } else {
                    "n/a".into()
                }
            };
            println!(
                "| {} | {} | {} | {} | {} | {} | {} |",
                w.name,
                ratio(wire.msgs_per_sec, cpp.msgs_per_sec),
                ratio(wire.msgs_per_sec, pulsar.msgs_per_sec),
                ratio(wire.cpu_s, cpp.cpu_s),
                ratio(wire.cpu_s, pulsar.cpu_s),
                lat(wire, cpp),
                lat(wire, pulsar),
            );
        }
    }
}
