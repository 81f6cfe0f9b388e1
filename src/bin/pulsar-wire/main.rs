//! `pulsar-wire`: produce, consume and measure from the command line.
//!
//! Built with the `cli` cargo feature:
//! `cargo run --release --features cli --bin pulsar-wire -- --help`.
//!
//! Every subcommand lives in its own file; this one parses the command
//! line, builds the [`Client`] the subcommands share, runs them on a tokio
//! runtime and turns errors into one line on stderr and a non-zero exit
//! code. Standard output carries only results (JSON lines), so it can be
//! piped into `jq` or a test.

mod client_conf;
mod consume;
mod demo;
mod dlq;
mod embedded;
mod pace;
mod perf;
mod perf_backlog;
mod perf_consume;
mod perf_idle;
mod perf_latency;
mod perf_memory;
mod perf_multiplex;
mod perf_produce;
mod perf_stats;
mod produce;
mod settings;

use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use pulsar_wire::Client;

/// A client for Apache Pulsar's binary protocol: produce, consume, measure.
#[derive(Debug, Parser)]
#[command(name = "pulsar-wire", version, about, long_about = None)]
struct Cli {
    /// The cluster: pulsar://host[:port] or pulsar+ssl://host[:port], several
    /// hosts separated by commas. Default: brokerServiceUrl of the client.conf,
    /// else pulsar://127.0.0.1:6650; `demo` without either starts an
    /// embedded broker.
    #[arg(long, global = true)]
    url: Option<String>,

    /// How long connecting to a broker may take, in milliseconds.
    #[arg(long, global = true, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    connect_timeout_ms: u64,

    /// How long a request (lookup, subscribe, create producer) waits for its
    /// answer, in milliseconds.
    #[arg(long, global = true, default_value_t = 30_000, value_parser = clap::value_parser!(u64).range(1..))]
    operation_timeout_ms: u64,

    /// Runtime worker threads; 1 runs everything on one thread.
    #[arg(long, global = true, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    threads: u16,

    #[command(flatten)]
    security: settings::SecurityArgs,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The main job: start an embedded broker (unless --url is given), then
    /// produce and consume a few hundred messages whose handler acks, nacks,
    /// times out, panics, retries later and dead-letters them, live.
    Demo(demo::Args),
    /// Send messages and print one JSON line per confirmed message.
    Produce(produce::Args),
    /// Receive messages and print one JSON line per message.
    Consume(consume::Args),
    /// Work with dead-letter topics: `dlq redrive` moves dead-lettered
    /// messages back to be processed again.
    #[command(subcommand)]
    Dlq(dlq::DlqCommand),
    /// Measure throughput and latency, like Apache Pulsar's pulsar-perf.
    #[command(subcommand)]
    Perf(perf::PerfCommand),
}

/// The system allocator, counting live heap bytes for `perf idle` and
/// `perf backlog` (see `perf_memory.rs`).
#[global_allocator]
static ALLOCATOR: perf_memory::Counting = perf_memory::Counting;

/// What a subcommand fails with: any error, shown as one line.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Err(e) = install_log() {
        return fail(e.as_ref());
    }
    if matches!(&cli.command, Command::Perf(perf) if perf.counts_allocations()) {
        perf_memory::count_allocations();
    }
    let runtime = if cli.threads == 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(usize::from(cli.threads))
            .enable_all()
            .build()
    };
    let runtime = match runtime {
        Ok(rt) => rt,
        Err(e) => return fail(&e),
    };
    // The work runs as a spawned task, not as the `block_on` future: on a
    // current-thread runtime, waking the `block_on` future from another task
    // costs an eventfd write and an epoll_wait, and the consume loop is
    // woken by the consumer's task once per message (strace: one
    // epoll_wait per message, half the wall time). Spawned tasks wake
    // each other through the run queue, with no system call.
    match runtime.block_on(async move { tokio::spawn(run(cli)).await }) {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(e)) => fail(e.as_ref()),
        Err(e) => fail(&e),
    }
}

/// Writes the library's log lines to stderr when `PULSAR_WIRE_LOG` holds a
/// filter in `tracing-subscriber`'s `EnvFilter` syntax, for example
/// `PULSAR_WIRE_LOG=pulsar_wire=debug` or `pulsar_wire::consumer=trace`.
fn install_log() -> Result<(), BoxError> {
    let Some(filter) = std::env::var_os("PULSAR_WIRE_LOG") else {
        return Ok(());
    };
    let filter = filter
        .into_string()
        .map_err(|_| "PULSAR_WIRE_LOG is not UTF-8")?;
    let filter = tracing_subscriber::EnvFilter::try_new(&filter)
        .map_err(|e| format!("PULSAR_WIRE_LOG={filter:?}: {e}"))?;
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init()
}

/// The service URL when `--url` is not given.
const DEFAULT_URL: &str = "pulsar://127.0.0.1:6650";

async fn run(cli: Cli) -> Result<(), BoxError> {
    let settings = cli.security.resolve(cli.url)?;
    let embedded = match (&cli.command, &settings.url) {
        (Command::Demo(_), None) => {
            let broker = embedded::EmbeddedBroker::start()?;
            eprintln!(
                "started an embedded pulsar-lite at {}",
                broker.service_url()
            );
            Some(broker)
        }
        _ => None,
    };
    let url = match (&embedded, &settings.url) {
        (Some(broker), _) => broker.service_url(),
        (None, url) => url.clone().unwrap_or_else(|| DEFAULT_URL.to_owned()),
    };
    let connections = match &cli.command {
        Command::Perf(perf) => perf.connections_per_broker(),
        _ => 1,
    };
    let client = settings
        .apply(Client::builder())?
        .service_url(url)
        .connections_per_broker(connections)
        .connection_timeout(Duration::from_millis(cli.connect_timeout_ms))
        .operation_timeout(Duration::from_millis(cli.operation_timeout_ms))
        .build()
        .await?;
    let result = match cli.command {
        Command::Demo(args) => demo::run(&client, args).await,
        Command::Produce(args) => produce::run(&client, args).await,
        Command::Consume(args) => consume::run(&client, args).await,
        Command::Dlq(command) => dlq::run(&client, command).await,
        Command::Perf(perf::PerfCommand::Produce(args)) => perf_produce::run(&client, args).await,
        Command::Perf(perf::PerfCommand::Consume(args)) => perf_consume::run(&client, args).await,
        Command::Perf(perf::PerfCommand::Latency(args)) => perf_latency::run(&client, args).await,
        Command::Perf(perf::PerfCommand::Multiplex(args)) => {
            perf_multiplex::run(&client, args).await
        }
        Command::Perf(perf::PerfCommand::Idle(args)) => perf_idle::run(&client, args).await,
        Command::Perf(perf::PerfCommand::Backlog(args)) => perf_backlog::run(&client, args).await,
    };
    client.close().await;
    // The embedded broker (if any) stops only after the client is closed.
    drop(embedded);
    result
}

/// Prints `error` and its causes on one line; exit code 1.
fn fail(error: &(dyn std::error::Error + 'static)) -> ExitCode {
    eprintln!("pulsar-wire: error: {}", one_line(error));
    ExitCode::FAILURE
}

/// `error: cause: cause's cause`, skipping causes already in the text
/// (transparent wrappers repeat their source's message).
fn one_line(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let part = cause.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = cause.source();
    }
    text.replace('\n', " ")
}

/// Writes one JSON value as a line on stdout. A closed stdout (`| head`)
/// is an error the caller stops on, not a panic.
pub(crate) fn print_json(value: &serde_json::Value) -> Result<(), BoxError> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    serde_json::to_writer(&mut out, value)?;
    out.write_all(b"\n")?;
    out.flush()?;
    Ok(())
}

pub(crate) use pace::{Pace, rate};

/// Parses `KEY=VALUE` (for `-p`).
pub(crate) fn key_value(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(format!("expected KEY=VALUE, got {s:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn key_value_needs_a_key_and_an_equals_sign() {
        assert_eq!(key_value("a=b=c"), Ok(("a".into(), "b=c".into())));
        assert_eq!(key_value("a="), Ok(("a".into(), String::new())));
        assert!(key_value("=b").is_err());
        assert!(key_value("ab").is_err());
    }

    #[test]
    fn one_line_joins_causes_without_repeating_them() {
        #[derive(Debug, thiserror::Error)]
        #[error("outer")]
        struct Outer(#[source] std::io::Error);
        let e = Outer(std::io::Error::other("inner\nline"));
        assert_eq!(one_line(&e), "outer: inner line");
    }
}
