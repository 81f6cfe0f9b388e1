//! `pulsar-wire dlq redrive`: publish dead-lettered messages again and ack
//! their dead-letter copies once confirmed; one JSON line per message.

use std::time::Duration;

use pulsar_wire::Client;
use pulsar_wire::consumer::{DEFAULT_REDRIVE_SUBSCRIPTION, Redriven, SkipReason, Skipped};

use crate::BoxError;

/// What to do with a dead-letter topic.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum DlqCommand {
    /// Publish dead-lettered messages again, to their REAL_TOPIC or --to,
    /// with their key, properties (the dead-letter ones stripped) and event
    /// time; each dead-letter copy is acked once its publish is confirmed.
    /// A REAL_TOPIC is a target only if the dead-letter topic is named for
    /// it (<topic>-<subscription>-DLQ) or it is given with --allow-target;
    /// other messages stay, each reported on stderr. Prints one JSON line
    /// per message moved (or, with --dry-run, that would move).
    Redrive(RedriveArgs),
}

/// Arguments of `dlq redrive`.
#[derive(Debug, clap::Args)]
pub(crate) struct RedriveArgs {
    /// The dead-letter topic to read.
    #[arg(long)]
    from: String,

    /// Publish every message here instead of its REAL_TOPIC.
    #[arg(long, value_name = "TOPIC")]
    to: Option<String>,

    /// Also move messages whose REAL_TOPIC is this topic (or one of its
    /// partitions) back there (repeatable).
    #[arg(long = "allow-target", value_name = "TOPIC")]
    allowed: Vec<String>,

    /// The subscription that reads the dead-letter topic (the one that
    /// retains its messages, e.g. the policy's initial subscription).
    #[arg(short = 's', long, default_value = DEFAULT_REDRIVE_SUBSCRIPTION)]
    subscription: String,

    /// Move only messages with this property (repeatable: all must match).
    #[arg(long = "filter-property", value_name = "KEY=VALUE", value_parser = crate::key_value)]
    filters: Vec<(String, String)>,

    /// Move at most N messages.
    #[arg(long, value_name = "N")]
    limit: Option<usize>,

    /// How long to wait for the next message while the broker says more
    /// are there, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 2000)]
    idle_ms: u64,

    /// List what would move; publish and ack nothing.
    #[arg(long)]
    dry_run: bool,
}

pub(crate) async fn run(client: &Client, command: DlqCommand) -> Result<(), BoxError> {
    let DlqCommand::Redrive(args) = command;
    let mut redrive = client
        .redrive(args.from)
        .subscription(args.subscription)
        .idle(Duration::from_millis(args.idle_ms));
    if let Some(to) = args.to {
        redrive = redrive.to(to);
    }
    for topic in args.allowed {
        redrive = redrive.allow_target(topic);
    }
    if let Some(limit) = args.limit {
        redrive = redrive.limit(limit);
    }
    for (key, value) in args.filters {
        redrive = redrive.filter_property(key, value);
    }
    let report = if args.dry_run {
        redrive.dry_run().await?
    } else {
        redrive.run().await?
    };
    for entry in &report.moved {
        crate::print_json(&line(entry, args.dry_run))?;
    }
    for skipped in &report.skipped {
        eprintln!("{}", skipped_line(skipped));
    }
    eprintln!(
        "{} {} message(s), left {}",
        if args.dry_run { "would move" } else { "moved" },
        report.moved.len(),
        report.skipped.len()
    );
    Ok(())
}

/// Why a message stays in the dead-letter topic, for stderr.
fn skipped_line(skipped: &Skipped) -> String {
    match &skipped.reason {
        SkipReason::ForeignTarget { real_topic } => format!(
            "left {}: its REAL_TOPIC {real_topic} is not a topic this dead-letter topic is for \
             (--to or --allow-target to move it)",
            skipped.id
        ),
        SkipReason::NoTarget => format!("left {}: no REAL_TOPIC (--to to move it)", skipped.id),
        _ => format!("left {}", skipped.id),
    }
}

fn line(entry: &Redriven, dry_run: bool) -> serde_json::Value {
    let properties: serde_json::Map<String, serde_json::Value> = entry
        .properties
        .iter()
        .map(|(k, v)| (k.clone(), serde_json::Value::from(v.as_str())))
        .collect();
    serde_json::json!({
        "id": entry.id.to_string(),
        "target": entry.target,
        "published": entry.published.map(|id| id.to_string()),
        "key": entry.key,
        "properties": properties,
        "dry_run": dry_run,
    })
}
