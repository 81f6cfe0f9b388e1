//! Transactions on Apache Pulsar with its transaction coordinator on
//! (`scripts/apache-pulsar-txn`; skipped without it), and the typed error where there is none.

mod acks;
mod exactly_once;
mod java;
mod visibility;

use std::collections::BTreeSet;

use pulsar_wire::{Consumer, Message};

use crate::common::guard;

/// Receives until `marker` arrives; returns the payloads before it.
async fn receive_until(consumer: &mut Consumer, marker: &str) -> Vec<String> {
    guard("receive until the marker", async {
        let mut seen = Vec::new();
        loop {
            let msg = consumer.receive().await.expect("receive");
            consumer.ack(&msg).await.expect("ack");
            let text = text(&msg);
            if text == marker {
                return seen;
            }
            seen.push(text);
        }
    })
    .await
}

fn text(msg: &Message) -> String {
    String::from_utf8_lossy(msg.payload()).into_owned()
}

fn set(items: impl IntoIterator<Item = String>) -> BTreeSet<String> {
    items.into_iter().collect()
}
