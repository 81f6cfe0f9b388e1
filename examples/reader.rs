//! Read a topic from its first message without a durable subscription:
//! nothing is acknowledged, and nothing is left behind on the broker.
//!
//! ```sh
//! PULSAR_SERVICE_URL=pulsar://127.0.0.1:6650 cargo run --example reader
//! ```

use std::time::Duration;

use pulsar_wire::{Client, MessageId};

#[tokio::main]
async fn main() -> Result<(), pulsar_wire::Error> {
    let url = std::env::var("PULSAR_SERVICE_URL").unwrap_or("pulsar://127.0.0.1:6650".into());
    let client = Client::builder().service_url(url).build().await?;
    let mut reader = client
        .reader("persistent://public/default/orders")
        .start_message_id(MessageId::EARLIEST)
        .create()
        .await?;
    // Print what is there, and stop once nothing new came for two seconds.
    while let Ok(next) = tokio::time::timeout(Duration::from_secs(2), reader.read_next()).await {
        let msg = next?;
        println!(
            "{} at {}: {:?}",
            msg.id(),
            msg.publish_time(),
            msg.payload()
        );
    }
    reader.close().await?;
    client.close().await;
    Ok(())
}
