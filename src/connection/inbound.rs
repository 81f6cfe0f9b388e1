//! Classifying inbound frames: which are answers to requests (by request
//! id), which are events for a producer or consumer (by their ids), and which
//! the actor must answer itself (PING, AUTH_CHALLENGE). Pure, like the
//! [`Router`] whose state it updates.

use tracing::{debug, warn};

use super::router::{Outcome, Router};
use super::{BrokerHint, ConsumerEvent, ProducerEvent, Response, TopicListEvent};
use crate::ids::{ConsumerId, ProducerId, RequestId, SequenceId, WatcherId};
use crate::message_id::MessageId;
use crate::proto::BaseCommand;
use crate::proto::base_command::Type;
use crate::proto::command_lookup_topic_response::LookupType;
use crate::proto::command_partitioned_topic_metadata_response::LookupType as MetadataLookupType;
use crate::proto::command_topic_migrated::ResourceType;
use crate::wire::{Frame, Payload};

/// What the actor must do about an inbound frame, beyond the routing the
/// router already did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reaction {
    /// Nothing more.
    None,
    /// The broker sent PING: answer with PONG.
    SendPong,
    /// The broker sent AUTH_CHALLENGE: answer with AUTH_RESPONSE.
    AnswerAuthChallenge,
    /// The broker sent consumer `consumer` an entry it held no permit for:
    /// it ignores flow control, so the connection must end before the
    /// consumer's buffer grows without bound.
    PermitsExceeded {
        /// The consumer flooded.
        consumer: ConsumerId,
    },
    /// The broker sent consumer `consumer` a MESSAGE without a payload:
    /// nothing reaches the consumer, so the permit it took goes back to
    /// the broker here (else a zero-queue consumer would wait for ever).
    ReturnPermit {
        /// The consumer the MESSAGE named.
        consumer: ConsumerId,
    },
}

impl Router {
    /// Classifies an inbound frame and routes it: an answer to its waiter, an
    /// event to its producer or consumer. Frames for unknown ids are logged
    /// and dropped.
    pub(crate) fn on_inbound(&mut self, frame: Frame) -> Reaction {
        let Frame { command, payload } = frame;
        let Ok(kind) = Type::try_from(command.r#type) else {
            debug!(
                command_type = command.r#type,
                "command of an unknown type ignored"
            );
            return Reaction::None;
        };
        match kind {
            Type::Ping => return Reaction::SendPong,
            Type::AuthChallenge => return Reaction::AnswerAuthChallenge,
            Type::Pong => {}
            Type::Success
            | Type::Error
            | Type::ProducerSuccess
            | Type::LookupResponse
            | Type::PartitionedMetadataResponse
            | Type::GetLastMessageIdResponse
            | Type::AckResponse
            | Type::GetTopicsOfNamespaceResponse
            | Type::GetSchemaResponse
            | Type::GetOrCreateSchemaResponse
            | Type::WatchTopicListSuccess => self.on_response(command),
            Type::TcClientConnectResponse
            | Type::NewTxnResponse
            | Type::AddPartitionToTxnResponse
            | Type::AddSubscriptionToTxnResponse
            | Type::EndTxnResponse => self.on_coordinator_response(command),
            Type::WatchTopicUpdate => {
                if let Some(b) = command.watch_topic_update {
                    let event = TopicListEvent::Update {
                        added: b.new_topics,
                        deleted: b.deleted_topics,
                        hash: b.topics_hash,
                    };
                    self.deliver_to_watcher(WatcherId(b.watcher_id), event);
                }
            }
            Type::SendReceipt
            | Type::SendError
            | Type::CloseProducer
            | Type::CloseConsumer
            | Type::ActiveConsumerChange
            | Type::ReachedEndOfTopic
            | Type::TopicMigrated => self.on_notification(command),
            Type::Message => return self.on_message(command, payload),
            other => debug!(command = other.as_str_name(), "unhandled command ignored"),
        }
        Reaction::None
    }

    fn on_response(&mut self, c: BaseCommand) {
        let (id, outcome): (u64, Outcome) = match c {
            BaseCommand {
                success: Some(b), ..
            } => (b.request_id, Ok(Response::Success(*b))),
            BaseCommand { error: Some(b), .. } => {
                (b.request_id, Err((b.error(), b.message.clone())))
            }
            BaseCommand {
                producer_success: Some(b),
                ..
            } => {
                if b.producer_ready == Some(false) {
                    debug!(
                        request = b.request_id,
                        "producer queued for exclusive access"
                    );
                    self.hold(RequestId(b.request_id));
                    return;
                }
                (b.request_id, Ok(Response::ProducerSuccess(*b)))
            }
            BaseCommand {
                lookup_topic_response: Some(b),
                ..
            } => match b.response() {
                LookupType::Failed => (
                    b.request_id,
                    Err((b.error(), b.message.clone().unwrap_or_default())),
                ),
                _ => (b.request_id, Ok(Response::LookupResponse(*b))),
            },
            BaseCommand {
                partition_metadata_response: Some(b),
                ..
            } => match b.response() {
                MetadataLookupType::Failed => (
                    b.request_id,
                    Err((b.error(), b.message.clone().unwrap_or_default())),
                ),
                MetadataLookupType::Success => {
                    (b.request_id, Ok(Response::PartitionedMetadataResponse(*b)))
                }
            },
            BaseCommand {
                get_last_message_id_response: Some(b),
                ..
            } => (b.request_id, Ok(Response::GetLastMessageIdResponse(*b))),
            BaseCommand {
                ack_response: Some(b),
                ..
            } => {
                let Some(id) = b.request_id else {
                    debug!(
                        consumer = b.consumer_id,
                        "ACK_RESPONSE without request id ignored"
                    );
                    return;
                };
                match b.error {
                    Some(_) => (id, Err((b.error(), b.message.clone().unwrap_or_default()))),
                    None => (id, Ok(Response::AckResponse(*b))),
                }
            }
            BaseCommand {
                get_topics_of_namespace_response: Some(b),
                ..
            } => (b.request_id, Ok(Response::GetTopicsOfNamespaceResponse(*b))),
            BaseCommand {
                watch_topic_list_success: Some(b),
                ..
            } => (b.request_id, Ok(Response::WatchTopicListSuccess(*b))),
            BaseCommand {
                get_schema_response: Some(b),
                ..
            } => match b.error_code {
                Some(_) => (
                    b.request_id,
                    Err((b.error_code(), b.error_message.clone().unwrap_or_default())),
                ),
                None => (b.request_id, Ok(Response::GetSchemaResponse(*b))),
            },
            BaseCommand {
                get_or_create_schema_response: Some(b),
                ..
            } => match b.error_code {
                Some(_) => (
                    b.request_id,
                    Err((b.error_code(), b.error_message.clone().unwrap_or_default())),
                ),
                None => (b.request_id, Ok(Response::GetOrCreateSchemaResponse(*b))),
            },
            other => {
                // The frame decoder guarantees the body named by the type.
                debug!(
                    command = other.r#type().as_str_name(),
                    "response without body ignored"
                );
                return;
            }
        };
        self.answer(RequestId(id), outcome);
    }

    /// The transaction coordinator's answers: each carries its error (if
    /// any) in the body, like ACK_RESPONSE.
    fn on_coordinator_response(&mut self, c: BaseCommand) {
        type Failure = Option<(crate::proto::ServerError, String)>;
        fn failure(
            code: Option<i32>,
            error: crate::proto::ServerError,
            message: Option<&String>,
        ) -> Failure {
            code.map(|_| (error, message.cloned().unwrap_or_default()))
        }
        let (id, failed, answer): (u64, Failure, Response) = match c {
            BaseCommand {
                tc_client_connect_response: Some(b),
                ..
            } => (
                b.request_id,
                failure(b.error, b.error(), b.message.as_ref()),
                Response::TcClientConnectResponse(*b),
            ),
            BaseCommand {
                new_txn_response: Some(b),
                ..
            } => (
                b.request_id,
                failure(b.error, b.error(), b.message.as_ref()),
                Response::NewTxnResponse(*b),
            ),
            BaseCommand {
                add_partition_to_txn_response: Some(b),
                ..
            } => (
                b.request_id,
                failure(b.error, b.error(), b.message.as_ref()),
                Response::AddPartitionToTxnResponse(*b),
            ),
            BaseCommand {
                add_subscription_to_txn_response: Some(b),
                ..
            } => (
                b.request_id,
                failure(b.error, b.error(), b.message.as_ref()),
                Response::AddSubscriptionToTxnResponse(*b),
            ),
            BaseCommand {
                end_txn_response: Some(b),
                ..
            } => (
                b.request_id,
                failure(b.error, b.error(), b.message.as_ref()),
                Response::EndTxnResponse(*b),
            ),
            other => {
                debug!(
                    command = other.r#type().as_str_name(),
                    "coordinator response without body ignored"
                );
                return;
            }
        };
        self.answer(RequestId(id), failed.map_or(Ok(answer), Err));
    }

    fn on_notification(&mut self, c: BaseCommand) {
        if let Some(b) = c.send_receipt {
            let event = ProducerEvent::Receipt {
                sequence_id: SequenceId(b.sequence_id),
                highest_sequence_id: SequenceId(b.highest_sequence_id.unwrap_or(0)),
                message_id: b.message_id.as_ref().map(MessageId::from_proto),
            };
            self.deliver_to_producer(ProducerId(b.producer_id), "SEND_RECEIPT", event, false);
        } else if let Some(b) = c.send_error {
            let event = ProducerEvent::SendError {
                sequence_id: SequenceId(b.sequence_id),
                code: b.error(),
                message: b.message,
            };
            self.deliver_to_producer(ProducerId(b.producer_id), "SEND_ERROR", event, false);
        } else if let Some(b) = c.close_producer {
            let hint = BrokerHint {
                broker_url: b.assigned_broker_service_url,
                broker_url_tls: b.assigned_broker_service_url_tls,
            };
            let id = ProducerId(b.producer_id);
            // The registration stays: the broker may still answer the sends
            // it was storing (see `ProducerEvent::Closed`).
            self.deliver_to_producer(id, "CLOSE_PRODUCER", ProducerEvent::Closed(hint), false);
        } else if let Some(b) = c.close_consumer {
            let hint = BrokerHint {
                broker_url: b.assigned_broker_service_url,
                broker_url_tls: b.assigned_broker_service_url_tls,
            };
            let id = ConsumerId(b.consumer_id);
            self.deliver_to_consumer(id, "CLOSE_CONSUMER", ConsumerEvent::Closed(hint), true);
        } else if let Some(b) = c.active_consumer_change {
            let event = ConsumerEvent::ActiveConsumerChange {
                is_active: b.is_active(),
            };
            let id = ConsumerId(b.consumer_id);
            self.deliver_to_consumer(id, "ACTIVE_CONSUMER_CHANGE", event, false);
        } else if let Some(b) = c.reached_end_of_topic {
            let id = ConsumerId(b.consumer_id);
            let event = ConsumerEvent::ReachedEndOfTopic;
            self.deliver_to_consumer(id, "REACHED_END_OF_TOPIC", event, false);
        } else if let Some(b) = c.topic_migrated {
            let resource_type = b.resource_type();
            let hint = BrokerHint {
                broker_url: b.broker_service_url,
                broker_url_tls: b.broker_service_url_tls,
            };
            match resource_type {
                ResourceType::Producer => {
                    let event = ProducerEvent::TopicMigrated(hint);
                    self.deliver_to_producer(
                        ProducerId(b.resource_id),
                        "TOPIC_MIGRATED",
                        event,
                        false,
                    );
                }
                ResourceType::Consumer => {
                    let event = ConsumerEvent::TopicMigrated(hint);
                    self.deliver_to_consumer(
                        ConsumerId(b.resource_id),
                        "TOPIC_MIGRATED",
                        event,
                        false,
                    );
                }
            }
        }
    }

    fn on_message(&mut self, c: BaseCommand, payload: Option<Box<Payload>>) -> Reaction {
        let Some(b) = c.message else {
            return Reaction::None;
        };
        let id = ConsumerId(b.consumer_id);
        if !self.take_permit(id) {
            return Reaction::PermitsExceeded { consumer: id };
        }
        let Some(payload) = payload else {
            warn!(consumer = %id, "MESSAGE without payload ignored; its permit goes back");
            return Reaction::ReturnPermit { consumer: id };
        };
        let event = ConsumerEvent::Message {
            message_id: MessageId::from_proto(&b.message_id),
            redelivery_count: b.redelivery_count.unwrap_or(0),
            ack_set: b.ack_set,
            consumer_epoch: b.consumer_epoch,
            payload,
        };
        self.deliver_to_consumer(id, "MESSAGE", event, false);
        Reaction::None
    }
}
