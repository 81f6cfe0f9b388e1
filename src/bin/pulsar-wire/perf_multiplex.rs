//! `pulsar-wire perf multiplex`: the throughput of many producers or
//! consumers sharing one connection, or with one connection each.
//!
//! `--handles N` producers (or consumers), one topic each (PREFIX-0 ..
//! PREFIX-(N-1)), move `--count` messages in all, split evenly. With
//! `--connections shared` they share the client's one connection to the
//! broker; with `--connections each` the client opens N connections
//! (`ClientBuilder::connections_per_broker(N)`) and the handles, opened
//! one after another, land on them round-robin. The summary counts the
//! TCP connections the process really holds.
//!
//! Producers: the measured interval runs from the first send to the last
//! receipt, every producer at once. Consumers (reading what a produce run
//! left on the same topics, from the earliest message, acking each): from
//! the first message any consumer receives to the last one taken. CPU is
//! the whole process's over that interval.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use pulsar_wire::Client;
use pulsar_wire::consumer::{Consumer, InitialPosition};
use pulsar_wire::producer::{Producer, ProducerMessage};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::BoxError;

/// Arguments of `perf multiplex`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Topic names are PREFIX-0, PREFIX-1, ... (a full name, or a short
    /// one in public/default).
    prefix: String,

    /// Produce to the topics, or consume what is on them.
    #[arg(long, value_enum)]
    kind: Kind,

    /// How many producers or consumers, one topic each.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    handles: u64,

    /// One connection for every handle, or one connection each.
    #[arg(long, value_enum, default_value_t = Connections::Shared)]
    connections: Connections,

    /// Messages in all, split evenly over the handles (the same count
    /// reads back what a produce run wrote).
    #[arg(short = 'n', long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..))]
    count: u64,

    /// Producers: payload size in bytes.
    #[arg(short = 's', long, default_value_t = 1024)]
    size: usize,

    /// Producers: batch messages.
    #[arg(long)]
    batch: bool,

    /// Producers: most messages sent and not yet confirmed, per producer.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    max_pending: u32,

    /// Consumers: the subscription name.
    #[arg(long, default_value = "pulsar-wire-perf-multiplex")]
    subscription: String,

    /// Consumers: how many messages the broker may push ahead, per consumer.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    receiver_queue: u32,

    /// Consumers: one ACK frame per this many milliseconds (0: each at once).
    #[arg(long, value_name = "MS", default_value_t = 100)]
    ack_group_ms: u64,

    /// Consumers: fail when one waits this many seconds for a message.
    #[arg(long, value_name = "SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    stall_timeout: u64,

    /// Print the summary as one JSON line on stdout.
    #[arg(long)]
    json: bool,
}

impl Args {
    /// The client's connections per broker for these arguments.
    pub(crate) fn connections_per_broker(&self) -> usize {
        match self.connections {
            Connections::Shared => 1,
            Connections::Each => usize::try_from(self.handles).unwrap_or(usize::MAX),
        }
    }

    /// Messages for handle `i`: an even share, the first ones one more.
    fn share(&self, i: u64) -> u64 {
        self.count / self.handles + u64::from(i < self.count % self.handles)
    }
}

/// Producers or consumers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Kind {
    Produce,
    Consume,
}

/// How the handles reach the broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Connections {
    /// All on the client's one connection.
    Shared,
    /// One connection per handle.
    Each,
}

/// The measured interval: wall time and process CPU at its start.
#[derive(Debug, Clone, Copy)]
struct Start {
    at: Instant,
    cpu: (f64, f64),
}

impl Start {
    fn now() -> Self {
        Self {
            at: Instant::now(),
            cpu: crate::perf::cpu_times(),
        }
    }
}

pub(crate) async fn run(client: &Client, args: Args) -> Result<(), BoxError> {
    let topic = |i: u64| format!("{}-{i}", args.prefix);
    let (start, count) = match args.kind {
        Kind::Produce => {
            let mut producers = Vec::new();
            for i in 0..args.handles {
                let producer = client
                    .producer(topic(i).as_str())
                    .batching(args.batch)
                    .max_pending_messages(args.max_pending as usize)
                    .create()
                    .await?;
                producers.push(producer);
            }
            let connections = tcp_connections();
            let start = Start::now();
            let payload = Bytes::from(vec![b'x'; args.size]);
            let mut tasks = JoinSet::new();
            for (i, producer) in (0..).zip(&producers) {
                let n = args.share(i);
                let max = args.max_pending as usize;
                tasks.spawn(produce(producer.clone(), n, payload.clone(), max));
            }
            while let Some(done) = tasks.join_next().await {
                done??;
            }
            let end = (Instant::now(), crate::perf::cpu_times());
            for p in &producers {
                p.close().await?;
            }
            ((start, end, connections), args.count)
        }
        Kind::Consume => {
            let first: Arc<OnceLock<Start>> = Arc::new(OnceLock::new());
            let mut tasks = JoinSet::new();
            for i in 0..args.handles {
                let consumer = crate::perf::shared_consumer(
                    client,
                    &topic(i),
                    &args.subscription,
                    InitialPosition::Earliest,
                    args.receiver_queue,
                    args.ack_group_ms,
                )
                .await?;
                let stall = Duration::from_secs(args.stall_timeout);
                tasks.spawn(consume(consumer, args.share(i), first.clone(), stall));
            }
            let connections = tcp_connections();
            let mut last = None;
            while let Some(done) = tasks.join_next().await {
                let at = done??;
                last = last.max(Some(at));
            }
            let end = (last.unwrap_or_else(Instant::now), crate::perf::cpu_times());
            let start = first.get().copied().unwrap_or_else(Start::now);
            ((start, end, connections), args.count)
        }
    };
    let (start, (end, (user1, sys1)), connections) = start;
    let seconds = end.duration_since(start.at).as_secs_f64().max(1e-9);
    let (user, sys) = (user1 - start.cpu.0, sys1 - start.cpu.1);
    let summary = serde_json::json!({
        "client": "wire",
        "op": match args.kind { Kind::Produce => "multiplex-produce", Kind::Consume => "multiplex-consume" },
        "prefix": args.prefix,
        "handles": args.handles,
        "connections": match args.connections { Connections::Shared => "shared", Connections::Each => "each" },
        "tcp_connections": connections,
        "count": count,
        "size": args.size,
        "batched": args.batch,
        "seconds": seconds,
        "msgs_per_sec": count as f64 / seconds,
        "cpu_user_s": user,
        "cpu_sys_s": sys,
        "cpu_us_per_msg": (user + sys) / count as f64 * 1e6,
    });
    eprintln!(
        "perf multiplex summary: {} {} on {} TCP connection(s): {} msgs in {:.3} s | {:.0} msg/s | CPU {:.3} s user + {:.3} s sys, {:.2} µs/msg",
        args.handles,
        match args.kind {
            Kind::Produce => "producers",
            Kind::Consume => "consumers",
        },
        connections,
        count,
        seconds,
        count as f64 / seconds,
        user,
        sys,
        (user + sys) / count as f64 * 1e6,
    );
    if args.json {
        crate::print_json(&summary)?;
    }
    Ok(())
}

/// Sends `n` messages, at most `max_pending` unconfirmed, and awaits every receipt.
async fn produce(
    producer: Producer,
    n: u64,
    payload: Bytes,
    max_pending: usize,
) -> Result<(), BoxError> {
    let mut pending = VecDeque::with_capacity(max_pending + 1);
    for _ in 0..n {
        pending.push_back(producer.send(ProducerMessage::new(payload.clone())).await?);
        if pending.len() > max_pending {
            if let Some(receipt) = pending.pop_front() {
                receipt.await?;
            }
        }
    }
    producer.flush().await?;
    for receipt in pending {
        receipt.await?;
    }
    Ok(())
}

/// Receives and acks `n` messages; returns when it took the last one. The
/// first message any consumer takes starts the measured interval. Waiting
/// longer than `stall` for a message is an error that says how far it got.
async fn consume(
    mut consumer: Consumer,
    n: u64,
    first: Arc<OnceLock<Start>>,
    stall: Duration,
) -> Result<Instant, BoxError> {
    let mut last = Instant::now();
    for got in 0..n {
        let Ok(msg) = tokio::time::timeout(stall, consumer.receive()).await else {
            let stats = crate::perf_stats::consumer(&consumer.stats(), None);
            return Err(format!(
                "{}: {got} of {n} messages, then nothing for {stall:?}; consumer stats: {}",
                consumer.topics().join(","),
                crate::perf_stats::text(&stats)
            )
            .into());
        };
        let msg = msg?;
        last = Instant::now();
        if first.get().is_none() {
            let _ = first.set(Start {
                at: last,
                cpu: crate::perf::cpu_times(),
            });
        }
        consumer.ack(&msg).await?;
    }
    consumer.close().await?;
    Ok(last)
}

/// How many established TCP connections this process holds (its socket
/// descriptors matched against /proc/self/net/tcp and tcp6); 0 if /proc
/// cannot be read.
fn tcp_connections() -> usize {
    let Ok(fds) = std::fs::read_dir("/proc/self/fd") else {
        return 0;
    };
    let inodes: HashSet<String> = fds
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter_map(|target| {
            let target = target.to_str()?;
            Some(
                target
                    .strip_prefix("socket:[")?
                    .strip_suffix(']')?
                    .to_owned(),
            )
        })
        .collect();
    ["/proc/self/net/tcp", "/proc/self/net/tcp6"]
        .iter()
        .filter_map(|table| std::fs::read_to_string(table).ok())
        .map(|table| established(&table, &inodes))
        .sum()
}

/// The rows of a /proc/net/tcp table that are established (state 01) and
/// whose inode is one of `inodes`.
fn established(table: &str, inodes: &HashSet<String>) -> usize {
    table
        .lines()
        .skip(1)
        .filter(|row| {
            let cols: Vec<&str> = row.split_whitespace().collect();
            cols.get(3) == Some(&"01") && cols.get(9).is_some_and(|i| inodes.contains(*i))
        })
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up_to_the_count() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            args: Args,
        }
        let cli = Cli::parse_from(["x", "p", "--kind", "produce", "--handles", "3", "-n", "10"]);
        let shares: Vec<u64> = (0..3).map(|i| cli.args.share(i)).collect();
        assert_eq!(shares, [4, 3, 3]);
        assert_eq!(cli.args.connections_per_broker(), 1);
        let each = Cli::parse_from([
            "x",
            "p",
            "--kind",
            "consume",
            "--handles",
            "7",
            "--connections",
            "each",
        ]);
        assert_eq!(each.args.connections_per_broker(), 7);
    }

    #[test]
    fn only_established_rows_of_our_sockets_count() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 0100007F:1A0A 0100007F:C350 01 00000000:00000000 00:00000000 00000000  1000        0 111 1 0\n\
   1: 0100007F:1A0B 0100007F:C351 0A 00000000:00000000 00:00000000 00000000  1000        0 222 1 0\n\
   2: 0100007F:1A0C 0100007F:C352 01 00000000:00000000 00:00000000 00000000  1000        0 333 1 0\n";
        let ours: HashSet<String> = ["111", "222"].map(String::from).into();
        assert_eq!(established(table, &ours), 1);
    }
}
