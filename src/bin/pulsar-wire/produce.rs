//! `pulsar-wire produce`: send texts (or generated payloads, or JSON values
//! in a schema) and print one JSON line per confirmed message.

use std::collections::VecDeque;
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use pulsar_wire::Client;
use pulsar_wire::producer::{Producer, ProducerBuilder, ProducerMessage, SendReceipt};
use pulsar_wire::schema::{Avro, Json, Schema};
use serde_json::Value;

use crate::BoxError;

/// Arguments of `produce`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The topic (a full name, or a short one in public/default).
    topic: String,

    /// A message to send (repeat for several). Without -m or -f, COUNT
    /// generated payloads of SIZE bytes are sent.
    #[arg(short = 'm', long = "message", value_name = "TEXT")]
    messages: Vec<String>,

    /// A file whose bytes are one message (repeat, or separate with
    /// commas, for several; as the official `pulsar-client produce -f`).
    #[arg(
        short = 'f',
        long = "files",
        alias = "file",
        value_name = "PATH",
        value_delimiter = ',',
        conflicts_with_all = ["messages", "size", "schema"]
    )]
    files: Vec<std::path::PathBuf>,

    /// Send at most this many messages a second (0, the default: as fast
    /// as the broker takes them).
    #[arg(short = 'r', long, value_name = "MSG_PER_S", default_value_t = 0.0, value_parser = crate::rate)]
    rate: f64,

    /// The -m values are base64 text of binary payloads.
    #[arg(long, requires = "messages")]
    base64: bool,

    /// Send JSON values in this schema, registered with the producer (with
    /// --value; the definition from --definition, else the topic's).
    #[arg(long, value_enum, requires = "values", conflicts_with_all = ["messages", "size"])]
    schema: Option<SchemaKind>,

    /// A JSON value to send in --schema (repeat for several).
    #[arg(long = "value", value_name = "JSON", requires = "schema")]
    values: Vec<String>,

    /// The Avro schema (JSON text) of --schema json|avro; default: the
    /// topic's latest schema of that type.
    #[arg(long, value_name = "AVRO_SCHEMA", requires = "schema")]
    definition: Option<String>,

    /// With -m: how many times to send the list; without: how many
    /// generated payloads to send.
    #[arg(
        short = 'n',
        long,
        alias = "num-produce",
        value_name = "COUNT",
        default_value_t = 1
    )]
    count: u64,

    /// Size of each generated payload in bytes (without -m).
    #[arg(
        long,
        value_name = "BYTES",
        default_value_t = 100,
        conflicts_with = "messages"
    )]
    size: usize,

    /// The partition key of every message.
    #[arg(short = 'k', long)]
    key: Option<String>,

    /// A property of every message (repeat for several).
    #[arg(
        short = 'p',
        long = "property",
        alias = "properties",
        value_name = "KEY=VALUE",
        value_parser = crate::key_value
    )]
    properties: Vec<(String, String)>,

    /// Batch messages (off by default: one entry per message).
    #[arg(long)]
    batch: bool,

    /// Split a message over the broker's max message size into chunks
    /// (consumers put them together again); turns batching off.
    #[arg(short = 'c', long, conflicts_with = "batch")]
    chunking: bool,

    /// Payload compression.
    #[arg(long, value_enum, default_value_t = Codec::None)]
    compression: Codec,

    /// Ask the broker to deliver each message this many milliseconds after
    /// it is sent (Shared and Key_Shared subscriptions).
    #[arg(long, value_name = "MS")]
    deliver_after_ms: Option<u64>,

    /// Most messages sent but not yet confirmed.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    max_pending: u32,
}

/// A schema format of `--schema`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum SchemaKind {
    /// JSON text; the definition is an Avro schema, as the Java client registers.
    Json,
    /// Avro's binary encoding.
    Avro,
}

/// A payload codec, as named on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Codec {
    None,
    Lz4,
    Zlib,
    Zstd,
    Snappy,
}

impl From<Codec> for pulsar_wire::compression::Compression {
    fn from(c: Codec) -> Self {
        match c {
            Codec::None => Self::None,
            Codec::Lz4 => Self::Lz4,
            Codec::Zlib => Self::Zlib,
            Codec::Zstd => Self::Zstd,
            Codec::Snappy => Self::Snappy,
        }
    }
}

/// Payload `i` of a generated run: `SIZE` printable bytes starting with
/// the index, so a consumer can tell them apart.
pub(crate) fn generated_payload(i: u64, size: usize) -> Bytes {
    let mut p = format!("message-{i} ").into_bytes();
    p.resize(size, b'.');
    Bytes::from(p)
}

pub(crate) async fn run(client: &Client, args: Args) -> Result<(), BoxError> {
    let builder = client
        .producer(args.topic.as_str())
        .batching(args.batch)
        .chunking(args.chunking)
        .compression(args.compression.into())
        .max_pending_messages(args.max_pending as usize);
    let (producer, payloads) = match args.schema {
        None => {
            // Files are read before anything reaches the broker.
            let payloads = payloads(&args)?;
            (builder.create().await?, payloads)
        }
        Some(kind) => {
            let (producer, encoded) = with_schema(client, builder, kind, &args).await?;
            let count = args.count;
            let payloads: Box<dyn Iterator<Item = Bytes> + Send> =
                Box::new((0..count).flat_map(move |_| encoded.clone().into_iter()));
            (producer, payloads)
        }
    };
    let window = args.max_pending as usize;
    let mut in_flight: VecDeque<SendReceipt> = VecDeque::with_capacity(window.min(4096));
    let mut confirmed = 0u64;
    let mut pace = crate::Pace::new(args.rate);
    for payload in payloads {
        pace.next().await;
        if in_flight.len() == window {
            let receipt = in_flight.pop_front().ok_or("empty window")?;
            confirm(receipt, &mut confirmed).await?;
        }
        let mut msg = ProducerMessage::new(payload);
        if let Some(key) = &args.key {
            msg = msg.key(key.as_str());
        }
        for (k, v) in &args.properties {
            msg = msg.property(k.as_str(), v.as_str());
        }
        if let Some(ms) = args.deliver_after_ms {
            msg = msg.deliver_after(Duration::from_millis(ms));
        }
        in_flight.push_back(producer.send(msg).await?);
    }
    producer.flush().await?;
    for receipt in in_flight {
        confirm(receipt, &mut confirmed).await?;
    }
    producer.close().await?;
    Ok(())
}

/// A producer registering `kind` with the definition given (or the
/// topic's), and the --value payloads encoded in it. Every value is
/// encoded before the producer is created: a value that does not fit
/// registers nothing and sends nothing.
async fn with_schema(
    client: &Client,
    builder: ProducerBuilder,
    kind: SchemaKind,
    args: &Args,
) -> Result<(Producer, Vec<Bytes>), BoxError> {
    let definition = match &args.definition {
        Some(text) => text.clone(),
        None => topic_definition(client, &args.topic, kind).await?,
    };
    let values = args
        .values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            serde_json::from_str::<Value>(v)
                .map_err(|e| format!("--value #{}: not JSON: {e}", i + 1).into())
        })
        .collect::<Result<Vec<Value>, BoxError>>()?;
    match kind {
        SchemaKind::Json => create_typed(builder, Json::<Value>::new(definition), &values).await,
        SchemaKind::Avro => {
            let schema = Avro::<Value>::from_definition(&definition)
                .map_err(|e| format!("--definition: {e}"))?;
            create_typed(builder, schema, &values).await
        }
    }
}

/// The definition of `topic`'s latest schema, which must be of `kind`.
async fn topic_definition(
    client: &Client,
    topic: &str,
    kind: SchemaKind,
) -> Result<String, BoxError> {
    let want = match kind {
        SchemaKind::Json => pulsar_wire::schema::SchemaType::Json,
        SchemaKind::Avro => pulsar_wire::schema::SchemaType::Avro,
    };
    match client.schema(topic, None).await? {
        Some((info, _)) if info.schema_type == want => Ok(info
            .definition()
            .ok_or_else(|| format!("the {want} schema of {topic} is not text"))?
            .to_owned()),
        Some((info, _)) => Err(format!(
            "{topic} has a {} schema, not {want}; give --definition",
            info.schema_type
        )
        .into()),
        None => Err(format!("{topic} has no schema; give --definition").into()),
    }
}

async fn create_typed(
    builder: ProducerBuilder,
    schema: impl Schema<Value> + 'static,
    values: &[Value],
) -> Result<(Producer, Vec<Bytes>), BoxError> {
    let encoded = values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            schema
                .encode(v)
                .map_err(|e| format!("--value #{}: {e}", i + 1).into())
        })
        .collect::<Result<Vec<Bytes>, BoxError>>()?;
    let typed = builder.create_with(schema).await?;
    Ok((Producer::clone(&typed), encoded))
}

/// Waits for one receipt and prints its line.
async fn confirm(receipt: SendReceipt, confirmed: &mut u64) -> Result<(), BoxError> {
    let id = receipt.await?;
    crate::print_json(&serde_json::json!({
        "index": *confirmed,
        "message_id": id.to_string(),
    }))?;
    *confirmed += 1;
    Ok(())
}

/// Every payload to send, in order.
fn payloads(args: &Args) -> Result<Box<dyn Iterator<Item = Bytes> + Send>, BoxError> {
    if !args.files.is_empty() {
        let mut list = Vec::with_capacity(args.files.len());
        for path in &args.files {
            let bytes = std::fs::read(path)
                .map_err(|e| format!("-f {}: cannot read it: {e}", path.display()))?;
            list.push(Bytes::from(bytes));
        }
        let count = args.count;
        return Ok(Box::new(
            (0..count).flat_map(move |_| list.clone().into_iter()),
        ));
    }
    if args.messages.is_empty() {
        let (count, size) = (args.count, args.size);
        return Ok(Box::new(
            (0..count).map(move |i| generated_payload(i, size)),
        ));
    }
    let mut list = Vec::with_capacity(args.messages.len());
    for (i, m) in args.messages.iter().enumerate() {
        list.push(if args.base64 {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(m)
                .map_err(|e| format!("-m #{}: not base64: {e}", i + 1))?;
            Bytes::from(bytes)
        } else {
            Bytes::from(m.clone())
        });
    }
    let count = args.count;
    Ok(Box::new(
        (0..count).flat_map(move |_| list.clone().into_iter()),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_payloads_have_the_size_and_start_with_their_index() {
        assert_eq!(&generated_payload(7, 12)[..], b"message-7 ..");
        assert_eq!(generated_payload(123, 4).len(), 4);
        assert_eq!(generated_payload(0, 1000).len(), 1000);
    }
}
