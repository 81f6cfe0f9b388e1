//! What a connection hands back: [`Response`]s to requests, and the events
//! it routes to registered producers ([`ProducerEvent`]) and consumers
//! ([`ConsumerEvent`]).

use crate::connection::ConnectionError;
use crate::ids::SequenceId;
use crate::message_id::MessageId;
use crate::proto;
use crate::proto::ServerError;
use crate::wire::Payload;

/// The successful answer to a request, matched to it by request id.
///
/// Error answers never arrive here: `ERROR`, and responses that carry an
/// error code (a failed LOOKUP or PARTITIONED_METADATA, an ACK_RESPONSE or
/// a transaction coordinator's answer with an error), become
/// [`ConnectionError::Server`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Response {
    /// `SUCCESS` (subscribe, unsubscribe, seek, close producer/consumer, …).
    Success(proto::CommandSuccess),
    /// `PRODUCER_SUCCESS` with `producer_ready` not false (a producer still
    /// waiting for exclusive access stays pending until its second answer).
    ProducerSuccess(proto::CommandProducerSuccess),
    /// `LOOKUP_RESPONSE` (Connect or Redirect).
    LookupResponse(proto::CommandLookupTopicResponse),
    /// `PARTITIONED_METADATA_RESPONSE`.
    PartitionedMetadataResponse(proto::CommandPartitionedTopicMetadataResponse),
    /// `GET_LAST_MESSAGE_ID_RESPONSE`.
    GetLastMessageIdResponse(proto::CommandGetLastMessageIdResponse),
    /// `ACK_RESPONSE` to an ack that carried a request id.
    AckResponse(proto::CommandAckResponse),
    /// `GET_TOPICS_OF_NAMESPACE_RESPONSE`.
    GetTopicsOfNamespaceResponse(proto::CommandGetTopicsOfNamespaceResponse),
    /// `TC_CLIENT_CONNECT_RESPONSE` without an error: the transaction
    /// coordinator is served on this connection.
    TcClientConnectResponse(proto::CommandTcClientConnectResponse),
    /// `NEW_TXN_RESPONSE` without an error: the new transaction's id.
    NewTxnResponse(proto::CommandNewTxnResponse),
    /// `ADD_PARTITION_TO_TXN_RESPONSE` without an error.
    AddPartitionToTxnResponse(proto::CommandAddPartitionToTxnResponse),
    /// `ADD_SUBSCRIPTION_TO_TXN_RESPONSE` without an error.
    AddSubscriptionToTxnResponse(proto::CommandAddSubscriptionToTxnResponse),
    /// `END_TXN_RESPONSE` without an error: the transaction is committed or aborted.
    EndTxnResponse(proto::CommandEndTxnResponse),
    /// `WATCH_TOPIC_LIST_SUCCESS`: the watcher is set, with the topics it
    /// matches now.
    WatchTopicListSuccess(proto::CommandWatchTopicListSuccess),
    /// `GET_SCHEMA_RESPONSE` without an error code.
    GetSchemaResponse(proto::CommandGetSchemaResponse),
    /// `GET_OR_CREATE_SCHEMA_RESPONSE` without an error code.
    GetOrCreateSchemaResponse(proto::CommandGetOrCreateSchemaResponse),
}

impl Response {
    /// The protocol name of the command that came back, e.g. `"LOOKUP_RESPONSE"`,
    /// for errors that say "expected X, got Y".
    pub const fn kind(&self) -> &'static str {
        match self {
            Self::Success(_) => "SUCCESS",
            Self::ProducerSuccess(_) => "PRODUCER_SUCCESS",
            Self::LookupResponse(_) => "LOOKUP_RESPONSE",
            Self::PartitionedMetadataResponse(_) => "PARTITIONED_METADATA_RESPONSE",
            Self::GetLastMessageIdResponse(_) => "GET_LAST_MESSAGE_ID_RESPONSE",
            Self::AckResponse(_) => "ACK_RESPONSE",
            Self::GetTopicsOfNamespaceResponse(_) => "GET_TOPICS_OF_NAMESPACE_RESPONSE",
            Self::TcClientConnectResponse(_) => "TC_CLIENT_CONNECT_RESPONSE",
            Self::NewTxnResponse(_) => "NEW_TXN_RESPONSE",
            Self::AddPartitionToTxnResponse(_) => "ADD_PARTITION_TO_TXN_RESPONSE",
            Self::AddSubscriptionToTxnResponse(_) => "ADD_SUBSCRIPTION_TO_TXN_RESPONSE",
            Self::EndTxnResponse(_) => "END_TXN_RESPONSE",
            Self::WatchTopicListSuccess(_) => "WATCH_TOPIC_LIST_SUCCESS",
            Self::GetSchemaResponse(_) => "GET_SCHEMA_RESPONSE",
            Self::GetOrCreateSchemaResponse(_) => "GET_OR_CREATE_SCHEMA_RESPONSE",
        }
    }
}

/// Where the broker says a closed or migrated producer/consumer should go next.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BrokerHint {
    /// `pulsar://…` URL of the broker now serving the topic, if the broker named one.
    pub broker_url: Option<String>,
    /// `pulsar+ssl://…` URL of that broker, if the broker named one.
    pub broker_url_tls: Option<String>,
}

impl BrokerHint {
    /// The URL a client on TLS (`tls`) or plaintext follows: the field of
    /// its scheme, and only if that URL really has the scheme. A hint that
    /// would take a TLS client to plaintext (or the reverse) names nothing,
    /// so the caller looks the topic up instead.
    pub(crate) fn url_for(&self, tls: bool) -> Option<&str> {
        let (url, scheme) = match tls {
            true => (self.broker_url_tls.as_deref(), "pulsar+ssl://"),
            false => (self.broker_url.as_deref(), "pulsar://"),
        };
        let url = url.filter(|url| !url.is_empty())?;
        if url.starts_with(scheme) {
            return Some(url);
        }
        tracing::warn!(
            url,
            expected = scheme,
            "broker hint of the wrong scheme ignored; looking the topic up instead"
        );
        None
    }
}

/// What a connection tells a registered producer.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ProducerEvent {
    /// `SEND_RECEIPT`: the broker stored the message (or batch) starting at `sequence_id`.
    Receipt {
        /// The sequence id of the SEND (the first message of a batch).
        sequence_id: SequenceId,
        /// The highest sequence id of the batch, when the broker sent it (0 otherwise).
        highest_sequence_id: SequenceId,
        /// Where the message was stored; `None` if the broker did not say.
        message_id: Option<MessageId>,
    },
    /// `SEND_ERROR`: the broker did not store the message at `sequence_id`.
    SendError {
        /// The sequence id of the failed SEND.
        sequence_id: SequenceId,
        /// The broker's error code (`ChecksumError`, `NotAllowedError`, …).
        code: ServerError,
        /// The broker's explanation.
        message: String,
    },
    /// `CLOSE_PRODUCER` from the broker (topic unloaded, moved, deleted):
    /// the producer must be created again. The registration stays until
    /// [`Connection::unregister_producer`](crate::Connection::unregister_producer):
    /// Apache Pulsar sends `SEND_RECEIPT` after `CLOSE_PRODUCER` for the
    /// sends it was storing as it closed, and those messages are stored.
    Closed(BrokerHint),
    /// `TOPIC_MIGRATED`: the topic moved to another cluster.
    TopicMigrated(BrokerHint),
    /// The connection died; every registration is gone and no more events follow.
    ConnectionLost(ConnectionError),
}

/// What a connection tells a registered consumer.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ConsumerEvent {
    /// `MESSAGE`: an entry (one message or a batch) for this consumer.
    Message {
        /// The entry's id, as the broker sent it (partition may be unset).
        message_id: MessageId,
        /// How often the broker delivered this entry before.
        redelivery_count: u32,
        /// For a batch some of whose members were already acked: the
        /// remaining members as a bit set (empty when there is none).
        ack_set: Vec<i64>,
        /// The consumer epoch the broker stamped on the delivery, if any.
        consumer_epoch: Option<u64>,
        /// Metadata and bytes; the checksum state says whether they can be
        /// trusted. Boxed: a consumer's mailbox holds room for 32 events
        /// from the start, which inline metadata made 19 KiB per consumer.
        payload: Box<Payload>,
    },
    /// `CLOSE_CONSUMER` from the broker. The registration is removed: the
    /// consumer must subscribe again.
    Closed(BrokerHint),
    /// `ACTIVE_CONSUMER_CHANGE` (Failover subscriptions).
    ActiveConsumerChange {
        /// Whether this consumer is now the active one.
        is_active: bool,
    },
    /// `REACHED_END_OF_TOPIC`: the topic was terminated and everything was delivered.
    ReachedEndOfTopic,
    /// `TOPIC_MIGRATED`: the topic moved to another cluster.
    TopicMigrated(BrokerHint),
    /// The connection died; every registration is gone and no more events follow.
    ConnectionLost(ConnectionError),
}

/// What a connection tells a registered topic-list watcher.
#[derive(Debug, Clone)]
pub(crate) enum TopicListEvent {
    /// `WATCH_TOPIC_UPDATE`: topics created and deleted, and the hash of
    /// the list after them.
    Update {
        added: Vec<String>,
        deleted: Vec<String>,
        hash: String,
    },
    /// The connection died; the watcher is gone with it.
    ConnectionLost(ConnectionError),
}

#[cfg(test)]
mod tests {
    use super::BrokerHint;

    fn hint(plain: &str, tls: &str) -> BrokerHint {
        BrokerHint {
            broker_url: Some(plain.into()),
            broker_url_tls: Some(tls.into()),
        }
    }

    #[test]
    fn a_hint_is_followed_only_in_the_clients_own_scheme() {
        let good = hint("pulsar://b:6650", "pulsar+ssl://b:6651");
        assert_eq!(good.url_for(true), Some("pulsar+ssl://b:6651"));
        assert_eq!(good.url_for(false), Some("pulsar://b:6650"));
        // A plaintext URL in the TLS field never leads a TLS client there.
        let downgrade = hint("pulsar://b:6650", "pulsar://b:6650");
        assert_eq!(downgrade.url_for(true), None);
        let upgrade = hint("pulsar+ssl://b:6651", "");
        assert_eq!(upgrade.url_for(false), None);
        assert_eq!(upgrade.url_for(true), None, "empty names nothing");
        assert_eq!(BrokerHint::default().url_for(true), None);
    }
}
