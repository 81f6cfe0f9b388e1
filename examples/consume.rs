//! Consume with a handler: ack what succeeds, let failures come back, and
//! send a message that fails three times to the dead-letter topic.
//!
//! ```sh
//! PULSAR_SERVICE_URL=pulsar://127.0.0.1:6650 cargo run --example consume
//! ```
//! Stop it with Ctrl-C; messages whose payload contains "poison" end in
//! `persistent://public/default/orders-billing-DLQ`.

use std::time::Duration;

use pulsar_wire::Client;
use pulsar_wire::consumer::{
    DeadLetterPolicy, InitialPosition, NackPolicy, Outcome, RunOptions, SubscriptionType,
};

#[tokio::main]
async fn main() -> Result<(), pulsar_wire::Error> {
    let url = std::env::var("PULSAR_SERVICE_URL").unwrap_or("pulsar://127.0.0.1:6650".into());
    let client = Client::builder().service_url(url).build().await?;
    let consumer = client
        .consumer("persistent://public/default/orders", "billing")
        .subscription_type(SubscriptionType::Shared)
        .initial_position(InitialPosition::Earliest)
        // A message the handler neither acks nor fails comes back after 30 s.
        .ack_timeout(Duration::from_secs(30))
        // A failed message comes back after a second, not at once.
        .nack_policy(NackPolicy::FixedDelay(Duration::from_secs(1)))
        // Deliveries 0, 1 and 2 reach the handler; the fourth goes to the DLQ.
        .dead_letter_policy(DeadLetterPolicy::after_redeliveries(3))
        .subscribe()
        .await?;

    let handler = |msg: pulsar_wire::Message| async move {
        let text = String::from_utf8_lossy(msg.payload()).into_owned();
        println!("{} (delivery {}): {text}", msg.id(), msg.redelivery_count());
        if text.contains("poison") {
            // An error nacks the message; so would a panic.
            return Err(format!("cannot process {text:?}"));
        }
        Ok(Outcome::Ack)
    };
    let run = consumer.run(handler, RunOptions::default().concurrency(4));
    tokio::select! {
        result = run => result?,
        _ = tokio::signal::ctrl_c() => consumer.close().await?,
    }
    client.close().await;
    Ok(())
}
