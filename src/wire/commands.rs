//! One constructor per command the client sends. Ids are typed, so a
//! consumer id cannot be passed where a request id belongs.
//!
//! # Examples
//! ```
//! use pulsar_wire::ids::ConsumerId;
//! use pulsar_wire::wire::commands;
//! let flow = commands::flow(ConsumerId(3), 1000);
//! assert_eq!(flow.flow.as_ref().map(|f| f.message_permits), Some(1000));
//! ```

use bytes::Bytes;

use crate::ids::{ConsumerId, ProducerId, RequestId, SequenceId, TxnId, WatcherId};
use crate::message_id::MessageId;
use crate::proto::base_command::Type;
use crate::proto::command_ack::{AckType, ValidationError};
use crate::proto::{self, BaseCommand};

/// The protocol version this client speaks (v21: the newest Apache Pulsar defines).
pub const PROTOCOL_VERSION: i32 = proto::ProtocolVersion::V21 as i32;

/// The client version string sent in CONNECT.
pub const CLIENT_VERSION: &str = concat!("pulsar-wire/", env!("CARGO_PKG_VERSION"));

fn base(kind: Type) -> BaseCommand {
    BaseCommand {
        r#type: kind as i32,
        ..BaseCommand::default()
    }
}

/// Credentials for CONNECT or AUTH_RESPONSE: a method name and its data.
#[derive(Clone)]
pub struct AuthPayload {
    /// The method, e.g. `"token"`.
    pub method: String,
    /// The secret itself; never printed (see the `Debug` impl).
    pub data: Bytes,
}

impl std::fmt::Debug for AuthPayload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthPayload")
            .field("method", &self.method)
            .field("data", &"<redacted>")
            .finish()
    }
}

/// CONNECT: protocol v21 and the features this client supports.
///
/// `proxy_to_broker_url` asks a Pulsar proxy to forward to that broker.
pub fn connect(auth: Option<&AuthPayload>, proxy_to_broker_url: Option<&str>) -> BaseCommand {
    BaseCommand {
        connect: Some(Box::new(proto::CommandConnect {
            client_version: CLIENT_VERSION.to_owned(),
            protocol_version: Some(PROTOCOL_VERSION),
            auth_method_name: auth.map(|a| a.method.clone()),
            auth_data: auth.map(|a| a.data.clone()),
            proxy_to_broker_url: proxy_to_broker_url.map(str::to_owned),
            feature_flags: Some(proto::FeatureFlags {
                supports_auth_refresh: Some(true),
                supports_broker_entry_metadata: Some(true),
                supports_partial_producer: Some(false),
                supports_topic_watchers: Some(true),
                ..proto::FeatureFlags::default()
            }),
            ..proto::CommandConnect::default()
        })),
        ..base(Type::Connect)
    }
}

/// AUTH_RESPONSE: fresh credentials in answer to AUTH_CHALLENGE.
pub fn auth_response(auth: &AuthPayload) -> BaseCommand {
    BaseCommand {
        auth_response: Some(Box::new(proto::CommandAuthResponse {
            client_version: Some(CLIENT_VERSION.to_owned()),
            response: Some(proto::AuthData {
                auth_method_name: Some(auth.method.clone()),
                auth_data: Some(auth.data.clone()),
            }),
            protocol_version: Some(PROTOCOL_VERSION),
        })),
        ..base(Type::AuthResponse)
    }
}

/// PING: keepalive probe.
pub fn ping() -> BaseCommand {
    BaseCommand {
        ping: Some(Box::default()),
        ..base(Type::Ping)
    }
}

/// PONG: the answer to the broker's PING.
pub fn pong() -> BaseCommand {
    BaseCommand {
        pong: Some(Box::default()),
        ..base(Type::Pong)
    }
}

/// LOOKUP: which broker serves `topic`.
pub fn lookup(topic: &str, request: RequestId, authoritative: bool) -> BaseCommand {
    BaseCommand {
        lookup_topic: Some(Box::new(proto::CommandLookupTopic {
            topic: topic.to_owned(),
            request_id: request.0,
            authoritative: Some(authoritative),
            ..proto::CommandLookupTopic::default()
        })),
        ..base(Type::Lookup)
    }
}

/// PARTITIONED_METADATA: how many partitions `topic` has (0 = not partitioned).
pub fn partitioned_metadata(topic: &str, request: RequestId) -> BaseCommand {
    BaseCommand {
        partition_metadata: Some(Box::new(proto::CommandPartitionedTopicMetadata {
            topic: topic.to_owned(),
            request_id: request.0,
            ..proto::CommandPartitionedTopicMetadata::default()
        })),
        ..base(Type::PartitionedMetadata)
    }
}

/// PRODUCER: create a producer; the body is built by the producer layer.
pub fn producer(body: proto::CommandProducer) -> BaseCommand {
    BaseCommand {
        producer: Some(Box::new(body)),
        ..base(Type::Producer)
    }
}

/// SEND: the command part of a payload frame for `num_messages` messages
/// starting at `sequence`.
pub fn send(producer: ProducerId, sequence: SequenceId, num_messages: i32) -> BaseCommand {
    BaseCommand {
        send: Some(Box::new(proto::CommandSend {
            producer_id: producer.0,
            sequence_id: sequence.0,
            num_messages: (num_messages != 1).then_some(num_messages),
            ..proto::CommandSend::default()
        })),
        ..base(Type::Send)
    }
}

/// SEND of messages produced in transaction `txn` (none: a plain [`send`]).
pub fn send_in(
    producer: ProducerId,
    sequence: SequenceId,
    num_messages: i32,
    txn: Option<TxnId>,
) -> BaseCommand {
    let mut command = send(producer, sequence, num_messages);
    if let (Some(send), Some(txn)) = (command.send.as_mut(), txn) {
        send.txnid_most_bits = Some(txn.most_bits);
        send.txnid_least_bits = Some(txn.least_bits);
    }
    command
}

/// CLOSE_PRODUCER.
pub fn close_producer(producer: ProducerId, request: RequestId) -> BaseCommand {
    BaseCommand {
        close_producer: Some(Box::new(proto::CommandCloseProducer {
            producer_id: producer.0,
            request_id: request.0,
            ..proto::CommandCloseProducer::default()
        })),
        ..base(Type::CloseProducer)
    }
}

/// SUBSCRIBE: the body is built by the consumer layer.
pub fn subscribe(body: proto::CommandSubscribe) -> BaseCommand {
    BaseCommand {
        subscribe: Some(Box::new(body)),
        ..base(Type::Subscribe)
    }
}

/// FLOW: grant the broker `permits` more messages.
pub fn flow(consumer: ConsumerId, permits: u32) -> BaseCommand {
    BaseCommand {
        flow: Some(Box::new(proto::CommandFlow {
            consumer_id: consumer.0,
            message_permits: permits,
        })),
        ..base(Type::Flow)
    }
}

/// ACK of `ids`, individually or cumulatively; `request` asks for an ACK_RESPONSE.
pub fn ack(
    consumer: ConsumerId,
    ids: impl IntoIterator<Item = proto::MessageIdData>,
    kind: AckType,
    request: Option<RequestId>,
) -> BaseCommand {
    BaseCommand {
        ack: Some(Box::new(proto::CommandAck {
            consumer_id: consumer.0,
            ack_type: kind as i32,
            message_id: ids.into_iter().collect(),
            request_id: request.map(|r| r.0),
            ..proto::CommandAck::default()
        })),
        ..base(Type::Ack)
    }
}

/// ACK of `ids` in transaction `txn`: pending until the transaction ends
/// (applied on commit, undone on abort). The broker answers ACK_RESPONSE
/// for `request`.
pub fn ack_in(
    consumer: ConsumerId,
    ids: impl IntoIterator<Item = proto::MessageIdData>,
    kind: AckType,
    txn: TxnId,
    request: RequestId,
) -> BaseCommand {
    let mut command = ack(consumer, ids, kind, Some(request));
    if let Some(ack) = command.ack.as_mut() {
        ack.txnid_most_bits = Some(txn.most_bits);
        ack.txnid_least_bits = Some(txn.least_bits);
    }
    command
}

/// ACK with a validation error: tells the broker a message was dropped
/// unseen (for example, its checksum did not match).
pub fn ack_invalid(consumer: ConsumerId, id: MessageId, error: ValidationError) -> BaseCommand {
    let mut command = ack(consumer, [id.to_proto()], AckType::Individual, None);
    if let Some(ack) = command.ack.as_mut() {
        ack.validation_error = Some(error as i32);
    }
    command
}

/// The most message ids one ACK or REDELIVER frame names (as the Java
/// client's `MAX_ACK_GROUP_SIZE`).
pub const MAX_IDS_PER_FRAME: usize = 1000;

/// The most encoded id bytes one ACK or REDELIVER frame carries: far below
/// any broker's frame limit, even when ids carry large batch `ack_set`s.
pub const MAX_ID_BYTES_PER_FRAME: usize = 1 << 20;

/// Splits `ids` into runs that each fit one ACK or REDELIVER frame (at most
/// [`MAX_IDS_PER_FRAME`] ids and [`MAX_ID_BYTES_PER_FRAME`] bytes), in
/// order; no ids make one empty run.
///
/// # Examples
/// ```
/// use pulsar_wire::MessageId;
/// use pulsar_wire::wire::commands;
/// let ids: Vec<_> = (0..2500).map(|e| MessageId::new(1, e).to_proto()).collect();
/// let runs = commands::split_ids(ids);
/// assert_eq!(runs.iter().map(Vec::len).collect::<Vec<_>>(), [1000, 1000, 500]);
/// ```
pub fn split_ids(ids: Vec<proto::MessageIdData>) -> Vec<Vec<proto::MessageIdData>> {
    use prost::Message as _;
    if ids.len() <= MAX_IDS_PER_FRAME
        && ids.iter().map(|id| id.encoded_len() + 3).sum::<usize>() <= MAX_ID_BYTES_PER_FRAME
    {
        return vec![ids];
    }
    let mut runs = Vec::new();
    let mut run = Vec::new();
    let mut bytes = 0;
    for id in ids {
        // The field tag and length prefix of the id come on top.
        let size = id.encoded_len() + 3;
        if !run.is_empty()
            && (run.len() == MAX_IDS_PER_FRAME || bytes + size > MAX_ID_BYTES_PER_FRAME)
        {
            runs.push(std::mem::take(&mut run));
            bytes = 0;
        }
        bytes += size;
        run.push(id);
    }
    if !run.is_empty() {
        runs.push(run);
    }
    runs
}

/// REDELIVER_UNACKNOWLEDGED_MESSAGES naming `ids` (empty: everything unacked).
pub fn redeliver(
    consumer: ConsumerId,
    ids: impl IntoIterator<Item = proto::MessageIdData>,
    consumer_epoch: Option<u64>,
) -> BaseCommand {
    BaseCommand {
        redeliver_unacknowledged_messages: Some(Box::new(
            proto::CommandRedeliverUnacknowledgedMessages {
                consumer_id: consumer.0,
                message_ids: ids.into_iter().collect(),
                consumer_epoch,
            },
        )),
        ..base(Type::RedeliverUnacknowledgedMessages)
    }
}

/// Where a SEEK moves the subscription.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeekTarget {
    /// To this message id.
    MessageId(MessageId),
    /// To the first message published at or after this time (ms since the epoch).
    PublishTime(u64),
}

/// SEEK. For a message id, `ack_set` (bit `i` set: member `i` unacked)
/// marks the members of its batch before it as acked; empty for none.
pub fn seek(
    consumer: ConsumerId,
    request: RequestId,
    target: SeekTarget,
    ack_set: Vec<i64>,
) -> BaseCommand {
    let (message_id, message_publish_time) = match target {
        SeekTarget::MessageId(id) => {
            let mut data = id.to_proto();
            data.ack_set = ack_set;
            (Some(data), None)
        }
        SeekTarget::PublishTime(t) => (None, Some(t)),
    };
    BaseCommand {
        seek: Some(Box::new(proto::CommandSeek {
            consumer_id: consumer.0,
            request_id: request.0,
            message_id,
            message_publish_time,
        })),
        ..base(Type::Seek)
    }
}

/// UNSUBSCRIBE.
pub fn unsubscribe(consumer: ConsumerId, request: RequestId) -> BaseCommand {
    BaseCommand {
        unsubscribe: Some(Box::new(proto::CommandUnsubscribe {
            consumer_id: consumer.0,
            request_id: request.0,
            force: None,
        })),
        ..base(Type::Unsubscribe)
    }
}

/// CLOSE_CONSUMER.
pub fn close_consumer(consumer: ConsumerId, request: RequestId) -> BaseCommand {
    BaseCommand {
        close_consumer: Some(Box::new(proto::CommandCloseConsumer {
            consumer_id: consumer.0,
            request_id: request.0,
            ..proto::CommandCloseConsumer::default()
        })),
        ..base(Type::CloseConsumer)
    }
}

/// GET_LAST_MESSAGE_ID.
pub fn get_last_message_id(consumer: ConsumerId, request: RequestId) -> BaseCommand {
    BaseCommand {
        get_last_message_id: Some(Box::new(proto::CommandGetLastMessageId {
            consumer_id: consumer.0,
            request_id: request.0,
        })),
        ..base(Type::GetLastMessageId)
    }
}

/// TC_CLIENT_CONNECT_REQUEST: attach this connection to transaction coordinator `tc`.
pub fn tc_client_connect(tc: u64, request: RequestId) -> BaseCommand {
    BaseCommand {
        tc_client_connect_request: Some(Box::new(proto::CommandTcClientConnectRequest {
            request_id: request.0,
            tc_id: tc,
        })),
        ..base(Type::TcClientConnectRequest)
    }
}

/// NEW_TXN on coordinator `tc`: a transaction the coordinator aborts by
/// itself once `timeout` has passed (sent in milliseconds, as the Java
/// client does, whatever the field's name says).
pub fn new_txn(tc: u64, timeout: std::time::Duration, request: RequestId) -> BaseCommand {
    BaseCommand {
        new_txn: Some(Box::new(proto::CommandNewTxn {
            request_id: request.0,
            txn_ttl_seconds: Some(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX)),
            tc_id: Some(tc),
        })),
        ..base(Type::NewTxn)
    }
}

/// ADD_PARTITION_TO_TXN: `txn` will produce to `partitions` (full topic names).
pub fn add_partition_to_txn(
    txn: TxnId,
    partitions: Vec<String>,
    request: RequestId,
) -> BaseCommand {
    BaseCommand {
        add_partition_to_txn: Some(Box::new(proto::CommandAddPartitionToTxn {
            request_id: request.0,
            txnid_least_bits: Some(txn.least_bits),
            txnid_most_bits: Some(txn.most_bits),
            partitions,
        })),
        ..base(Type::AddPartitionToTxn)
    }
}

/// ADD_SUBSCRIPTION_TO_TXN: `txn` will ack on `subscription` of `topic`.
pub fn add_subscription_to_txn(
    txn: TxnId,
    topic: &str,
    subscription: &str,
    request: RequestId,
) -> BaseCommand {
    BaseCommand {
        add_subscription_to_txn: Some(Box::new(proto::CommandAddSubscriptionToTxn {
            request_id: request.0,
            txnid_least_bits: Some(txn.least_bits),
            txnid_most_bits: Some(txn.most_bits),
            subscription: vec![proto::Subscription {
                topic: topic.to_owned(),
                subscription: subscription.to_owned(),
            }],
        })),
        ..base(Type::AddSubscriptionToTxn)
    }
}

/// END_TXN: commit or abort `txn`.
pub fn end_txn(txn: TxnId, action: proto::TxnAction, request: RequestId) -> BaseCommand {
    BaseCommand {
        end_txn: Some(Box::new(proto::CommandEndTxn {
            request_id: request.0,
            txnid_least_bits: Some(txn.least_bits),
            txnid_most_bits: Some(txn.most_bits),
            txn_action: Some(action as i32),
        })),
        ..base(Type::EndTxn)
    }
}

/// GET_TOPICS_OF_NAMESPACE: the topics of `namespace` (`tenant/ns`) of
/// `mode`, filtered by the broker with `pattern` if it can, and none at
/// all if their hash is still `hash`.
pub fn get_topics_of_namespace(
    namespace: &str,
    mode: proto::command_get_topics_of_namespace::Mode,
    pattern: Option<&str>,
    hash: Option<&str>,
    request: RequestId,
) -> BaseCommand {
    BaseCommand {
        get_topics_of_namespace: Some(Box::new(proto::CommandGetTopicsOfNamespace {
            request_id: request.0,
            namespace: namespace.to_owned(),
            mode: Some(mode as i32),
            topics_pattern: pattern.map(str::to_owned),
            topics_hash: hash.map(str::to_owned),
        })),
        ..base(Type::GetTopicsOfNamespace)
    }
}

/// WATCH_TOPIC_LIST: tell watcher `watcher` of the persistent topics of
/// `namespace` matching `pattern` as they come and go; `hash` is what
/// the client knows already, when it watches again.
pub fn watch_topic_list(
    watcher: WatcherId,
    namespace: &str,
    pattern: &str,
    hash: Option<&str>,
    request: RequestId,
) -> BaseCommand {
    BaseCommand {
        watch_topic_list: Some(Box::new(proto::CommandWatchTopicList {
            request_id: request.0,
            watcher_id: watcher.0,
            namespace: namespace.to_owned(),
            topics_pattern: pattern.to_owned(),
            topics_hash: hash.map(str::to_owned),
        })),
        ..base(Type::WatchTopicList)
    }
}

/// WATCH_TOPIC_LIST_CLOSE: stop watcher `watcher`.
pub fn watch_topic_list_close(watcher: WatcherId, request: RequestId) -> BaseCommand {
    BaseCommand {
        watch_topic_list_close: Some(Box::new(proto::CommandWatchTopicListClose {
            request_id: request.0,
            watcher_id: watcher.0,
        })),
        ..base(Type::WatchTopicListClose)
    }
}

/// GET_SCHEMA: the schema of `topic` at `version` (the latest when `None`).
pub fn get_schema(topic: &str, version: Option<Bytes>, request: RequestId) -> BaseCommand {
    BaseCommand {
        get_schema: Some(Box::new(proto::CommandGetSchema {
            request_id: request.0,
            topic: topic.to_owned(),
            schema_version: version,
        })),
        ..base(Type::GetSchema)
    }
}

/// GET_OR_CREATE_SCHEMA: the version of `schema` on `topic`, registered
/// first if the topic's compatibility rules allow it.
pub fn get_or_create_schema(topic: &str, schema: proto::Schema, request: RequestId) -> BaseCommand {
    BaseCommand {
        get_or_create_schema: Some(Box::new(proto::CommandGetOrCreateSchema {
            request_id: request.0,
            topic: topic.to_owned(),
            schema,
        })),
        ..base(Type::GetOrCreateSchema)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_with_large_ack_sets_split_by_bytes_and_every_frame_fits() {
        // Batches of 64 Ki members: each id carries 8 KiB of ack set.
        let ids: Vec<_> = (0..1000)
            .map(|e| proto::MessageIdData {
                ack_set: vec![-1; 1024],
                ..MessageId::new(1, e).to_proto()
            })
            .collect();
        let runs = split_ids(ids);
        assert!(runs.len() > 1, "one run of 8 MiB");
        assert_eq!(runs.iter().map(Vec::len).sum::<usize>(), 1000);
        for run in runs {
            let frame =
                crate::wire::Frame::simple(ack(ConsumerId(1), run, AckType::Individual, None));
            let size = crate::wire::encoded_len(&frame);
            assert!(size <= MAX_ID_BYTES_PER_FRAME + 64, "{size}");
        }
        assert_eq!(split_ids(Vec::new()), vec![Vec::new()]);
    }

    #[test]
    fn connect_speaks_v21_with_feature_flags() {
        let c = connect(None, None);
        let body = c.connect.expect("body");
        assert_eq!(body.protocol_version, Some(21));
        let flags = body.feature_flags.expect("flags");
        assert_eq!(flags.supports_auth_refresh, Some(true));
        assert_eq!(flags.supports_broker_entry_metadata, Some(true));
        assert_eq!(flags.supports_topic_watchers, Some(true));
        assert!(body.auth_data.is_none());
    }

    #[test]
    fn auth_payload_debug_never_shows_the_secret() {
        let auth = AuthPayload {
            method: "token".into(),
            data: Bytes::from_static(b"s3cr3t"),
        };
        let shown = format!("{auth:?}");
        assert!(
            shown.contains("token") && !shown.contains("s3cr3t"),
            "{shown}"
        );
    }

    #[test]
    fn send_omits_num_messages_for_one() {
        let one = send(ProducerId(1), SequenceId(5), 1);
        assert_eq!(one.send.expect("body").num_messages, None);
        let ten = send(ProducerId(1), SequenceId(5), 10);
        assert_eq!(ten.send.expect("body").num_messages, Some(10));
    }
}
