//! Consume-transform-produce in transactions, with the transforming
//! process killed (SIGKILL) in the middle of a transaction and started
//! again: every input is reflected exactly once in the output.
//!
//! The transforming process is this test binary again, running the ignored
//! test [`transform_in_its_own_process`].

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::Duration;

use pulsar_wire::consumer::{InitialPosition, SubscriptionType};
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

use super::{receive_until, text};
use crate::common::txn::TxnBroker;
use crate::common::{admin, guard, guard_for, unique_topic};

/// Set in the transforming child's environment.
const CHILD: &str = "PULSAR_WIRE_TXN_CHILD";
const INPUTS: usize = 100;
/// Messages taken into one transaction at most.
const PER_TXN: usize = 5;
/// Short, so the killed child's open transaction is aborted soon.
const TXN_TIMEOUT: Duration = Duration::from_secs(3);

struct Transformer {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Transformer {
    /// Starts the transforming child; with `pause_after`, it commits that
    /// many transactions, then sends and acks in one more, prints `PAUSED`
    /// and waits without committing it.
    fn start(broker: &TxnBroker, input: &str, output: &str, pause_after: Option<usize>) -> Self {
        let exe = std::env::current_exe().expect("test binary");
        let mut command = Command::new(exe);
        command
            .args([
                "transactions::exactly_once::transform_in_its_own_process",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD, "1")
            .env("PULSAR_TXN_SERVICE_URL", &broker.service_url)
            .env("PULSAR_TXN_ADMIN_URL", &broker.admin_url)
            .env("TXN_CHILD_INPUT", input)
            .env("TXN_CHILD_OUTPUT", output)
            .stdout(Stdio::piped())
            .kill_on_drop(true);
        if let Some(n) = pause_after {
            command.env("TXN_CHILD_PAUSE_AFTER", n.to_string());
        }
        let mut child = command.spawn().expect("start the transforming child");
        let stdout = child.stdout.take().expect("piped stdout");
        Self {
            child,
            lines: BufReader::new(stdout).lines(),
        }
    }

    /// Reads the child's output until a line starting with `prefix`.
    async fn wait_for(&mut self, prefix: &str) {
        guard("the transforming child's progress", async {
            while let Some(line) = self.lines.next_line().await.expect("child stdout") {
                if line.starts_with(prefix) {
                    return;
                }
            }
            panic!("the transforming child ended before printing {prefix}");
        })
        .await;
    }

    /// SIGKILL, and reaped.
    async fn kill(mut self) {
        self.child
            .kill()
            .await
            .expect("kill -9 the transforming child");
    }
}

#[tokio::test]
async fn consume_transform_produce_killed_mid_transaction_reflects_every_input_exactly_once() {
    let Some(broker) = TxnBroker::get() else {
        return;
    };
    let client = broker.client().await;
    let input = unique_topic("txn-eo-in");
    let output = unique_topic("txn-eo-out");
    let mut check = client
        .consumer(&output, "check")
        .subscription_type(SubscriptionType::Exclusive)
        .initial_position(InitialPosition::Earliest)
        .subscribe()
        .await
        .expect("subscribe to the output");
    let producer = client.producer(&input).create().await.expect("producer");
    for i in 0..INPUTS {
        let receipt = producer.send(format!("in-{i}")).await.expect("queue");
        receipt.await.expect("stored");
    }

    // The first run commits a few transactions, then is killed with one
    // open: its sends and acks are in that transaction, not committed.
    let mut first = Transformer::start(&broker, &input, &output, Some(4));
    first.wait_for("PAUSED").await;
    first.kill().await;

    // The second run carries on; the inputs of the killed transaction come
    // back once the coordinator aborts it at its timeout.
    let second = Transformer::start(&broker, &input, &output, None);
    let mut seen = BTreeMap::<String, usize>::new();
    guard_for(
        "every input reflected in the output",
        Duration::from_secs(120),
        async {
            while seen.len() < INPUTS {
                let msg = check.receive().await.expect("receive output");
                check.ack(&msg).await.expect("ack output");
                *seen.entry(text(&msg)).or_default() += 1;
            }
        },
    )
    .await;
    // Every input is consumed for good: the killed transaction's inputs
    // came back and were transformed again, in a committed transaction.
    guard_for(
        "the input subscription has no backlog",
        Duration::from_secs(120),
        async {
            while admin::subscription_backlog(&broker.admin_url, &input, "transform").await > 0 {}
        },
    )
    .await;
    second.kill().await;
    // Anything either run committed is before this marker.
    producer_to(&client, &output, "end").await;
    for late in receive_until(&mut check, "end").await {
        *seen.entry(late).or_default() += 1;
    }

    let expected: BTreeMap<String, usize> =
        (0..INPUTS).map(|i| (format!("out:in-{i}"), 1)).collect();
    let extra: Vec<_> = seen.iter().filter(|(_, n)| **n != 1).collect();
    assert!(extra.is_empty(), "outputs not exactly once: {extra:?}");
    assert_eq!(seen, expected);
}

async fn producer_to(client: &pulsar_wire::Client, topic: &str, payload: &str) {
    let producer = client.producer(topic).create().await.expect("producer");
    let receipt = producer.send(payload.to_owned()).await.expect("queue");
    receipt.await.expect("stored");
}

#[tokio::test]
#[ignore = "runs in a process of its own, started by the test above"]
async fn transform_in_its_own_process() {
    assert!(
        std::env::var_os(CHILD).is_some(),
        "run through consume_transform_produce_killed_mid_transaction_reflects_every_input_exactly_once"
    );
    let var = |name: &str| std::env::var(name).expect(name);
    let pause_after: Option<usize> = std::env::var("TXN_CHILD_PAUSE_AFTER")
        .ok()
        .map(|n| n.parse().expect("a count"));
    let broker = TxnBroker::get().expect("broker");
    let client = broker.client().await;
    let mut input = client
        .consumer(var("TXN_CHILD_INPUT"), "transform")
        .subscription_type(SubscriptionType::Failover)
        .initial_position(InitialPosition::Earliest)
        .subscribe()
        .await
        .expect("subscribe to the input");
    let output = client
        .producer(var("TXN_CHILD_OUTPUT"))
        .create()
        .await
        .expect("output producer");
    let mut committed = 0;
    loop {
        let mut batch = vec![input.receive().await.expect("receive")];
        while batch.len() < PER_TXN {
            match input.try_receive().await.expect("try receive") {
                Some(msg) => batch.push(msg),
                None => break,
            }
        }
        let txn = client
            .transaction()
            .timeout(TXN_TIMEOUT)
            .begin()
            .await
            .expect("begin");
        for msg in &batch {
            let out = format!("out:{}", text(msg));
            drop(output.send_in(&txn, out).await.expect("send in txn"));
            input.ack_in(&txn, msg).await.expect("ack in txn");
        }
        if pause_after == Some(committed) {
            // Stored on the broker, in the open transaction.
            output.flush().await.expect("flush");
            println!("PAUSED");
            std::future::pending::<()>().await;
        }
        txn.commit().await.expect("commit");
        committed += 1;
        println!("COMMITTED {committed}");
    }
}
