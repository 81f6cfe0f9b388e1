//! Produce a few messages and print where the broker stored each one.
//!
//! ```sh
//! PULSAR_SERVICE_URL=pulsar://127.0.0.1:6650 cargo run --example produce
//! ```

use std::time::Duration;

use pulsar_wire::Client;
use pulsar_wire::compression::Compression;
use pulsar_wire::producer::ProducerMessage;

#[tokio::main]
async fn main() -> Result<(), pulsar_wire::Error> {
    let url = std::env::var("PULSAR_SERVICE_URL").unwrap_or("pulsar://127.0.0.1:6650".into());
    let client = Client::builder().service_url(url).build().await?;
    let producer = client
        .producer("persistent://public/default/orders")
        .compression(Compression::Lz4)
        .batching_max_delay(Duration::from_millis(5))
        .create()
        .await?;

    // Pipelined: queue every message first, then await the receipts, which
    // resolve in order once the broker has stored each message.
    let mut receipts = Vec::new();
    for i in 0..10 {
        let message = ProducerMessage::new(format!("order {i}"))
            .key(format!("customer-{}", i % 3))
            .property("source", "example");
        receipts.push(producer.send(message).await?);
    }
    for receipt in receipts {
        println!("stored as {}", receipt.await?);
    }
    producer.close().await?;
    client.close().await;
    Ok(())
}
