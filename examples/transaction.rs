//! Consume-transform-produce, exactly once: each message of `words` is
//! turned upper case into `shouted`, and the output and the input's ack are
//! committed together in one transaction. A crash at any point leaves
//! either both or neither: after a restart, every input shows up in the
//! output once.
//!
//! ```sh
//! PULSAR_SERVICE_URL=pulsar://127.0.0.1:6650 cargo run --example transaction
//! ```
//! The broker must run its transaction coordinator
//! (`transactionCoordinatorEnabled=true`). Stop it with Ctrl-C.

use std::time::Duration;

use pulsar_wire::Client;
use pulsar_wire::consumer::{InitialPosition, SubscriptionType};

#[tokio::main]
async fn main() -> Result<(), pulsar_wire::Error> {
    let url = std::env::var("PULSAR_SERVICE_URL").unwrap_or("pulsar://127.0.0.1:6650".into());
    let client = Client::builder()
        .service_url(url)
        .enable_transaction(true)
        .build()
        .await?;
    let mut input = client
        .consumer("persistent://public/default/words", "shouter")
        .subscription_type(SubscriptionType::Failover)
        .initial_position(InitialPosition::Earliest)
        .subscribe()
        .await?;
    let output = client
        .producer("persistent://public/default/shouted")
        .create()
        .await?;

    loop {
        let msg = tokio::select! {
            msg = input.receive() => msg?,
            _ = tokio::signal::ctrl_c() => break,
        };
        // Aborted by the coordinator if it is not committed within 30 s.
        let txn = client
            .transaction()
            .timeout(Duration::from_secs(30))
            .begin()
            .await?;
        let shouted = String::from_utf8_lossy(msg.payload()).to_uppercase();
        // Stored now, visible to consumers of `shouted` only on commit.
        let receipt = output.send_in(&txn, shouted).await?;
        // Applied on commit; on abort the message comes back.
        input.ack_in(&txn, &msg).await?;
        // Waits for the send and the ack, then commits both.
        txn.commit().await?;
        println!("{} -> {}", msg.id(), receipt.await?);
    }
    input.close().await?;
    output.close().await?;
    client.close().await;
    Ok(())
}
