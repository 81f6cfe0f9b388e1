//! The commands the model broker sends (pure): one constructor per reply,
//! as `wire::commands` has one per client command.

use bytes::Bytes;

use crate::message_id::MessageId;
use crate::proto::base_command::Type;
use crate::proto::command_lookup_topic_response::LookupType;
use crate::proto::{self, BaseCommand, MessageMetadata, ServerError};
use crate::wire::{Checksum, Frame, Payload};

fn base(kind: Type) -> BaseCommand {
    BaseCommand {
        r#type: kind as i32,
        ..BaseCommand::default()
    }
}

fn frame(command: BaseCommand) -> Frame {
    Frame {
        command,
        payload: None,
    }
}

/// Apache Pulsar's default message size: 5 MiB.
pub(crate) const DEFAULT_MAX_MESSAGE_SIZE: i32 = 5 * 1024 * 1024;

/// CONNECTED, with the broker's message size.
pub(crate) fn connected(max_message_size: i32) -> Frame {
    frame(BaseCommand {
        connected: Some(Box::new(proto::CommandConnected {
            server_version: "pulsar-wire-testing".into(),
            protocol_version: Some(21),
            max_message_size: Some(max_message_size),
            feature_flags: None,
        })),
        ..base(Type::Connected)
    })
}

pub(crate) fn pong() -> Frame {
    frame(BaseCommand {
        pong: Some(Box::new(proto::CommandPong {})),
        ..base(Type::Pong)
    })
}

pub(crate) fn success(request_id: u64) -> Frame {
    frame(BaseCommand {
        success: Some(Box::new(proto::CommandSuccess {
            request_id,
            schema: None,
        })),
        ..base(Type::Success)
    })
}

pub(crate) fn error(request_id: u64, code: ServerError, message: String) -> Frame {
    frame(BaseCommand {
        error: Some(Box::new(proto::CommandError {
            request_id,
            error: code as i32,
            message,
        })),
        ..base(Type::Error)
    })
}

/// A lookup answered with this broker, authoritatively.
pub(crate) fn lookup(request_id: u64, url: &str) -> Frame {
    frame(BaseCommand {
        lookup_topic_response: Some(Box::new(proto::CommandLookupTopicResponse {
            broker_service_url: Some(url.into()),
            response: Some(LookupType::Connect as i32),
            request_id,
            authoritative: Some(true),
            ..proto::CommandLookupTopicResponse::default()
        })),
        ..base(Type::LookupResponse)
    })
}

pub(crate) fn partitions(request_id: u64, partitions: u32) -> Frame {
    frame(BaseCommand {
        partition_metadata_response: Some(Box::new(
            proto::CommandPartitionedTopicMetadataResponse {
                partitions: Some(partitions),
                request_id,
                ..proto::CommandPartitionedTopicMetadataResponse::default()
            },
        )),
        ..base(Type::PartitionedMetadataResponse)
    })
}

pub(crate) fn producer_success(request_id: u64, producer_name: String) -> Frame {
    frame(BaseCommand {
        producer_success: Some(Box::new(proto::CommandProducerSuccess {
            request_id,
            producer_name,
            last_sequence_id: Some(-1),
            ..proto::CommandProducerSuccess::default()
        })),
        ..base(Type::ProducerSuccess)
    })
}

pub(crate) fn receipt(producer_id: u64, sequence_id: u64, highest: u64, id: MessageId) -> Frame {
    frame(BaseCommand {
        send_receipt: Some(Box::new(proto::CommandSendReceipt {
            producer_id,
            sequence_id,
            message_id: Some(id.to_proto()),
            highest_sequence_id: Some(highest),
        })),
        ..base(Type::SendReceipt)
    })
}

pub(crate) fn send_error(producer_id: u64, sequence_id: u64, code: ServerError) -> Frame {
    frame(BaseCommand {
        send_error: Some(Box::new(proto::CommandSendError {
            producer_id,
            sequence_id,
            error: code as i32,
            message: format!("injected by the test broker: {code:?}"),
        })),
        ..base(Type::SendError)
    })
}

pub(crate) fn message(
    consumer_id: u64,
    id: MessageId,
    redelivery_count: u32,
    consumer_epoch: Option<u64>,
    metadata: MessageMetadata,
    data: Bytes,
) -> Frame {
    Frame {
        command: BaseCommand {
            message: Some(Box::new(proto::CommandMessage {
                consumer_id,
                message_id: id.to_proto(),
                redelivery_count: Some(redelivery_count),
                ack_set: Vec::new(),
                consumer_epoch,
            })),
            ..base(Type::Message)
        },
        payload: Some(Box::new(Payload {
            broker_entry_metadata: None,
            checksum: Checksum::Valid,
            metadata,
            data,
        })),
    }
}

pub(crate) fn ack_response(consumer_id: u64, request_id: u64) -> Frame {
    frame(BaseCommand {
        ack_response: Some(Box::new(proto::CommandAckResponse {
            consumer_id,
            request_id: Some(request_id),
            ..proto::CommandAckResponse::default()
        })),
        ..base(Type::AckResponse)
    })
}

pub(crate) fn active_consumer_change(consumer_id: u64, is_active: bool) -> Frame {
    frame(BaseCommand {
        active_consumer_change: Some(Box::new(proto::CommandActiveConsumerChange {
            consumer_id,
            is_active: Some(is_active),
        })),
        ..base(Type::ActiveConsumerChange)
    })
}

pub(crate) fn last_message_id(
    request_id: u64,
    last: MessageId,
    mark_delete: Option<MessageId>,
) -> Frame {
    frame(BaseCommand {
        get_last_message_id_response: Some(Box::new(proto::CommandGetLastMessageIdResponse {
            last_message_id: last.to_proto(),
            request_id,
            consumer_mark_delete_position: mark_delete.map(|id| id.to_proto()),
        })),
        ..base(Type::GetLastMessageIdResponse)
    })
}

/// CLOSE_CONSUMER from the broker (an unload): the client subscribes again.
pub(crate) fn close_consumer(consumer_id: u64) -> Frame {
    frame(BaseCommand {
        close_consumer: Some(Box::new(proto::CommandCloseConsumer {
            consumer_id,
            request_id: 0,
            ..proto::CommandCloseConsumer::default()
        })),
        ..base(Type::CloseConsumer)
    })
}

/// CLOSE_PRODUCER from the broker (an unload): the client reconnects it.
pub(crate) fn close_producer(producer_id: u64) -> Frame {
    frame(BaseCommand {
        close_producer: Some(Box::new(proto::CommandCloseProducer {
            producer_id,
            request_id: 0,
            ..proto::CommandCloseProducer::default()
        })),
        ..base(Type::CloseProducer)
    })
}
