//! The protocol by hand: start an embedded broker (pulsar-lite), speak to it
//! first with nothing but the codec (CONNECT, PING, LOOKUP), then through
//! the `Client` (lookup, partition metadata, the pooled connection).
//!
//! Run it with `cargo run --example raw_protocol` after `scripts/setup`.
//! The main job is `scripts/demo` (`pulsar-wire demo`).

use std::time::Instant;

use futures::{SinkExt, StreamExt};
use pulsar_wire::codec::PulsarCodec;
use pulsar_wire::ids::RequestId;
use pulsar_wire::proto::base_command::Type;
use pulsar_wire::wire::{Frame, commands};
use pulsar_wire::{Client, TopicName};
use tokio::net::TcpStream;
use tokio_util::codec::Framed;

#[path = "../tests/common/mod.rs"]
mod common;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

async fn next(frames: &mut Framed<TcpStream, PulsarCodec>, want: Type) -> Result<Frame> {
    loop {
        let frame = frames
            .next()
            .await
            .ok_or("broker closed the connection")??;
        match frame.command.r#type() {
            t if t == want => return Ok(frame),
            Type::Ping => frames.send(Frame::simple(commands::pong())).await?,
            other => return Err(format!("expected {want:?}, got {other:?}").into()),
        }
    }
}

#[tokio::main]
#[allow(clippy::disallowed_methods)] // a demo measuring wall time for display
async fn main() -> Result<()> {
    let broker = common::broker::TestBroker::start()
        .await
        .ok_or("pulsar-lite is not installed: run scripts/setup first")?;
    println!("embedded pulsar-lite listening at {}", broker.service_url());

    let socket = TcpStream::connect(broker.addr()).await?;
    let mut frames = Framed::new(socket, PulsarCodec::default());
    frames
        .send(Frame::simple(commands::connect(None, None)))
        .await?;
    let connected = next(&mut frames, Type::Connected).await?;
    let connected = connected
        .command
        .connected
        .ok_or("CONNECTED without body")?;
    println!(
        "CONNECT → CONNECTED: server {:?}, protocol v{} (we speak v{})",
        connected.server_version,
        connected.protocol_version(),
        commands::PROTOCOL_VERSION
    );

    let started = Instant::now();
    frames.send(Frame::simple(commands::ping())).await?;
    next(&mut frames, Type::Pong).await?;
    println!("PING → PONG in {:?}", started.elapsed());

    let topic = "persistent://public/default/demo";
    frames
        .send(Frame::simple(commands::lookup(topic, RequestId(1), false)))
        .await?;
    let answer = next(&mut frames, Type::LookupResponse).await?;
    let answer = answer.command.lookup_topic_response.ok_or("no body")?;
    println!(
        "LOOKUP {topic} → {:?} at {}",
        answer.response(),
        answer.broker_service_url.unwrap_or_default()
    );

    frames
        .send(Frame::simple(commands::partitioned_metadata(
            topic,
            RequestId(2),
        )))
        .await?;
    let answer = next(&mut frames, Type::PartitionedMetadataResponse).await?;
    let partitions = answer
        .command
        .partition_metadata_response
        .ok_or("no body")?
        .partitions();
    println!("PARTITIONED_METADATA {topic} → {partitions} partitions (0 = not partitioned)");

    // The same through the client layer: one pooled connection per broker.
    let client = Client::builder()
        .service_url(broker.service_url())
        .build()
        .await?;
    let name: TopicName = "demo".parse()?;
    println!("Client: \"demo\" is {name}");
    let connection = client.lookup(&name).await?;
    println!(
        "Client: lookup → connection {} to {} (max message size {} bytes)",
        connection.id(),
        connection.peer(),
        connection.max_message_size()
    );
    let partitions = client.partitioned_topic_metadata(&name).await?;
    println!("Client: {partitions} partitions");
    client.close().await;
    println!("done; stopping the embedded broker");
    Ok(())
}
