//! `pulsar-wire demo`, the main job: it must start and stop its own broker
//! and account for every message, each kind with its own fate.

use crate::common::broker::TestBroker;
use crate::{Run, pulsar_wire, run_raw};

/// The summary table's row for `kind`, split into its cells.
fn row(run: &Run, kind: &str) -> Vec<String> {
    let prefix = format!("| {kind} |");
    let line = run
        .stdout
        .lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no {kind:?} row in the summary: {run:#?}"));
    line.trim_matches('|')
        .split('|')
        .map(|cell| cell.trim().to_owned())
        .collect()
}

/// Checks the table: columns are kind, produced, deliveries, redelivery
/// counts, nacks, left to ack timeout, panics, retry topic, acked, in DLQ,
/// unaccounted.
fn check_summary(run: &Run, per_kind: u32) {
    assert_eq!(run.code, Some(0), "the demo failed: {run:#?}");
    let n = per_kind.to_string();
    let zero = "0".to_owned();
    for kind in ["nack-once", "timeout-once", "panic-once"] {
        let cells = row(run, kind);
        assert_eq!(cells[1], n, "{kind}: {cells:?}");
        assert_eq!(
            cells[3], "0, 1",
            "{kind}: seen once, then once more: {cells:?}"
        );
        assert_eq!(
            (&cells[8], &cells[9], &cells[10]),
            (&n, &zero, &zero),
            "{kind}: {cells:?}"
        );
    }
    let retry = row(run, "retry-later");
    assert_eq!(
        retry[7],
        format!("{n} / {n}"),
        "through the retry topic: {retry:?}"
    );
    assert_eq!((&retry[8], &retry[9]), (&n, &zero), "{retry:?}");
    let poison = row(run, "poison");
    assert_eq!(
        poison[3], "0, 1, 2",
        "max 3: the application sees 0, 1, 2: {poison:?}"
    );
    assert_eq!(
        (&poison[8], &poison[9], &poison[10]),
        (&zero, &n, &zero),
        "{poison:?}"
    );
    let all = row(run, "**all**");
    assert_eq!(all[1], (per_kind * 10).to_string(), "{all:?}");
    assert_eq!(all[10], "0", "every message accounted for: {all:?}");
    assert!(
        run.stderr.contains("DLQ ←") && run.stderr.contains("ORIGIN_MESSAGE_ID="),
        "dead-letter arrivals are shown live: {}",
        run.stderr
    );
}

#[tokio::test]
async fn the_demo_starts_its_own_broker_and_accounts_for_every_message() {
    let run = run_raw(&["demo", "-n", "60"]).await;
    assert!(
        run.stderr.contains("started an embedded pulsar-lite"),
        "{}",
        run.stderr
    );
    check_summary(&run, 6);
}

#[tokio::test]
async fn the_demo_runs_against_a_given_broker() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let run = pulsar_wire(&broker.service_url(), &["demo", "-n", "30"]).await;
    assert!(!run.stderr.contains("embedded"), "{}", run.stderr);
    check_summary(&run, 3);
}

#[tokio::test]
async fn the_demo_reports_an_unreachable_broker() {
    // Free, and reserved: no other test of this process is given it.
    let closed = crate::common::broker::reserve_addr();
    let run = pulsar_wire(&format!("pulsar://{closed}"), &["demo"]).await;
    assert_ne!(run.code, Some(0), "{run:#?}");
    assert!(run.stderr.starts_with("pulsar-wire: error:"), "{run:#?}");
}
