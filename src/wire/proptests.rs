//! Property tests: every command and metadata type round-trips through the
//! codec, and no input — valid or not, however split — makes decode panic or
//! allocate past its limit.

use bytes::{Bytes, BytesMut};
use proptest::collection::vec;
use proptest::option::of;
use proptest::prelude::*;

use super::*;
use crate::ids::{ConsumerId, ProducerId, RequestId, SequenceId};
use crate::message_id::MessageId;
use crate::proto::base_command::Type;
use crate::proto::command_ack::AckType;
use crate::proto::{self, BaseCommand, MessageIdData, MessageMetadata};

fn text() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9/:._-]{0,24}"
}

fn key_values() -> impl Strategy<Value = Vec<proto::KeyValue>> {
    vec((text(), text()), 0..4).prop_map(|kvs| {
        kvs.into_iter()
            .map(|(key, value)| proto::KeyValue { key, value })
            .collect()
    })
}

fn message_id() -> impl Strategy<Value = MessageIdData> {
    (
        any::<u64>(),
        any::<u64>(),
        -1..64i32,
        -1..1000i32,
        vec(any::<i64>(), 0..3),
    )
        .prop_map(|(l, e, p, b, ack_set)| MessageIdData {
            ack_set,
            ..MessageId::new(l, e)
                .with_partition(p)
                .with_batch_index(b)
                .to_proto()
        })
}

fn server_error() -> impl Strategy<Value = i32> {
    0..=25i32
}

fn boxed<T>(v: T) -> Option<Box<T>> {
    Some(Box::new(v))
}

fn with(kind: Type, f: impl FnOnce(&mut BaseCommand)) -> BaseCommand {
    let mut c = BaseCommand {
        r#type: kind as i32,
        ..BaseCommand::default()
    };
    f(&mut c);
    c
}

/// Commands the client sends, built by `commands`.
fn client_command() -> impl Strategy<Value = BaseCommand> {
    let ids = (any::<u64>(), any::<u64>());
    prop_oneof![
        (of(text()), of(text())).prop_map(|(token, proxy)| {
            let auth = token.map(|t| commands::AuthPayload {
                method: "token".into(),
                data: t.into(),
            });
            commands::connect(auth.as_ref(), proxy.as_deref())
        }),
        Just(commands::ping()),
        Just(commands::pong()),
        (text(), any::<u64>(), any::<bool>()).prop_map(|(t, r, a)| commands::lookup(
            &t,
            RequestId(r),
            a
        )),
        (text(), any::<u64>()).prop_map(|(t, r)| commands::partitioned_metadata(&t, RequestId(r))),
        (text(), ids, of(text()), key_values(), 0..4i32, of(text())).prop_map(
            |(topic, (p, r), name, metadata, mode, initial)| commands::producer(
                proto::CommandProducer {
                    topic,
                    producer_id: p,
                    request_id: r,
                    producer_name: name,
                    metadata,
                    producer_access_mode: Some(mode),
                    initial_subscription_name: initial,
                    ..proto::CommandProducer::default()
                }
            )
        ),
        (ids, 1..1000i32).prop_map(|((p, s), n)| commands::send(ProducerId(p), SequenceId(s), n)),
        (
            text(),
            text(),
            0..4i32,
            ids,
            of(message_id()),
            of(0..2i32),
            of(any::<bool>())
        )
            .prop_map(
                |(topic, subscription, sub_type, (c, r), start, position, durable)| {
                    commands::subscribe(proto::CommandSubscribe {
                        topic,
                        subscription,
                        sub_type,
                        consumer_id: c,
                        request_id: r,
                        start_message_id: start,
                        initial_position: position,
                        durable,
                        key_shared_meta: (sub_type == 3).then(|| proto::KeySharedMeta {
                            key_shared_mode: 1,
                            hash_ranges: vec![proto::IntRange {
                                start: 0,
                                end: 32767,
                            }],
                            allow_out_of_order_delivery: Some(false),
                        }),
                        ..proto::CommandSubscribe::default()
                    })
                }
            ),
        (any::<u64>(), any::<u32>()).prop_map(|(c, n)| commands::flow(ConsumerId(c), n)),
        (
            any::<u64>(),
            vec(message_id(), 1..5),
            any::<bool>(),
            of(any::<u64>())
        )
            .prop_map(|(c, ids, cumulative, r)| {
                let kind = if cumulative {
                    AckType::Cumulative
                } else {
                    AckType::Individual
                };
                commands::ack(ConsumerId(c), ids, kind, r.map(RequestId))
            }),
        (any::<u64>(), vec(message_id(), 0..5), of(any::<u64>()))
            .prop_map(|(c, ids, epoch)| commands::redeliver(ConsumerId(c), ids, epoch)),
        (ids, any::<u64>()).prop_map(|((c, r), t)| {
            commands::seek(
                ConsumerId(c),
                RequestId(r),
                commands::SeekTarget::PublishTime(t),
                Vec::new(),
            )
        }),
        ids.prop_map(|(c, r)| commands::unsubscribe(ConsumerId(c), RequestId(r))),
        ids.prop_map(|(c, r)| commands::close_consumer(ConsumerId(c), RequestId(r))),
        ids.prop_map(|(p, r)| commands::close_producer(ProducerId(p), RequestId(r))),
        ids.prop_map(|(c, r)| commands::get_last_message_id(ConsumerId(c), RequestId(r))),
    ]
}

/// Commands a broker sends.
fn broker_command() -> impl Strategy<Value = BaseCommand> {
    prop_oneof![
        (text(), of(any::<i32>())).prop_map(|(v, max)| with(Type::Connected, |c| {
            c.connected = boxed(proto::CommandConnected {
                server_version: v,
                protocol_version: Some(21),
                max_message_size: max,
                feature_flags: Some(proto::FeatureFlags {
                    supports_auth_refresh: Some(true),
                    ..Default::default()
                }),
            });
        })),
        any::<u64>().prop_map(|r| with(Type::Success, |c| {
            c.success = boxed(proto::CommandSuccess {
                request_id: r,
                schema: None,
            });
        })),
        (any::<u64>(), server_error(), text()).prop_map(|(r, e, m)| with(Type::Error, |c| {
            c.error = boxed(proto::CommandError {
                request_id: r,
                error: e,
                message: m,
            });
        })),
        (any::<u64>(), text(), any::<i64>()).prop_map(|(r, n, s)| with(
            Type::ProducerSuccess,
            |c| {
                c.producer_success = boxed(proto::CommandProducerSuccess {
                    request_id: r,
                    producer_name: n,
                    last_sequence_id: Some(s),
                    ..Default::default()
                });
            }
        )),
        (any::<u64>(), any::<u64>(), of(message_id())).prop_map(|(p, s, id)| with(
            Type::SendReceipt,
            |c| {
                c.send_receipt = boxed(proto::CommandSendReceipt {
                    producer_id: p,
                    sequence_id: s,
                    message_id: id,
                    highest_sequence_id: None,
                });
            }
        )),
        (any::<u64>(), any::<u64>(), server_error(), text()).prop_map(|(p, s, e, m)| with(
            Type::SendError,
            |c| {
                c.send_error = boxed(proto::CommandSendError {
                    producer_id: p,
                    sequence_id: s,
                    error: e,
                    message: m,
                });
            }
        )),
        (
            any::<u64>(),
            of(text()),
            0..3i32,
            any::<u64>(),
            any::<bool>(),
            any::<bool>()
        )
            .prop_map(
                |(r, url, kind, _, auth, proxy)| with(Type::LookupResponse, |c| {
                    c.lookup_topic_response = boxed(proto::CommandLookupTopicResponse {
                        broker_service_url: url,
                        response: Some(kind),
                        request_id: r,
                        authoritative: Some(auth),
                        proxy_through_service_url: Some(proxy),
                        ..Default::default()
                    });
                })
            ),
        (any::<u64>(), any::<u32>()).prop_map(|(r, n)| with(
            Type::PartitionedMetadataResponse,
            |c| {
                c.partition_metadata_response =
                    boxed(proto::CommandPartitionedTopicMetadataResponse {
                        partitions: Some(n),
                        request_id: r,
                        response: Some(0),
                        ..Default::default()
                    });
            }
        )),
        (any::<u64>(), any::<u64>(), of(text())).prop_map(|(p, r, url)| with(
            Type::CloseProducer,
            |c| {
                c.close_producer = boxed(proto::CommandCloseProducer {
                    producer_id: p,
                    request_id: r,
                    assigned_broker_service_url: url,
                    ..Default::default()
                });
            }
        )),
        (any::<u64>(), any::<bool>()).prop_map(|(id, active)| with(
            Type::ActiveConsumerChange,
            |c| {
                c.active_consumer_change = boxed(proto::CommandActiveConsumerChange {
                    consumer_id: id,
                    is_active: Some(active),
                });
            }
        )),
        any::<u64>().prop_map(|id| with(Type::ReachedEndOfTopic, |c| {
            c.reached_end_of_topic = boxed(proto::CommandReachedEndOfTopic { consumer_id: id });
        })),
        (any::<u64>(), 0..2i32, of(text())).prop_map(|(id, kind, url)| with(
            Type::TopicMigrated,
            |c| {
                c.topic_migrated = boxed(proto::CommandTopicMigrated {
                    resource_id: id,
                    resource_type: kind,
                    broker_service_url: url,
                    broker_service_url_tls: None,
                });
            }
        )),
        (any::<u64>(), of(any::<u64>())).prop_map(|(id, r)| with(Type::AckResponse, |c| {
            c.ack_response = boxed(proto::CommandAckResponse {
                consumer_id: id,
                request_id: r,
                ..Default::default()
            });
        })),
        (message_id(), any::<u64>()).prop_map(|(id, r)| with(
            Type::GetLastMessageIdResponse,
            |c| {
                c.get_last_message_id_response = boxed(proto::CommandGetLastMessageIdResponse {
                    last_message_id: id,
                    request_id: r,
                    consumer_mark_delete_position: None,
                });
            }
        )),
        of(vec(any::<u8>(), 0..16)).prop_map(|data| with(Type::AuthChallenge, |c| {
            c.auth_challenge = boxed(proto::CommandAuthChallenge {
                challenge: Some(proto::AuthData {
                    auth_method_name: Some("token".into()),
                    auth_data: data.map(Bytes::from),
                }),
                ..Default::default()
            });
        })),
    ]
}

fn metadata() -> impl Strategy<Value = MessageMetadata> {
    (
        (
            text(),
            any::<u64>(),
            any::<u64>(),
            key_values(),
            of(text()),
            of(0..5i32),
            of(any::<u32>()),
        ),
        (
            of(1..1000i32),
            of(any::<u64>()),
            of(vec(any::<u8>(), 0..8)),
            of(any::<i64>()),
            vec(text(), 0..2),
        ),
        (
            of(any::<bool>()),
            of(text()),
            of(any::<u64>()),
            of(any::<i32>()),
        ),
    )
        .prop_map(
            |(
                (name, seq, time, properties, key, compression, size),
                (batch, event, ordering, at, replicate_to),
                (null, uuid, highest, chunk),
            )| {
                MessageMetadata {
                    producer_name: name,
                    sequence_id: seq,
                    publish_time: time,
                    properties,
                    partition_key: key,
                    compression,
                    uncompressed_size: size,
                    num_messages_in_batch: batch,
                    event_time: event,
                    ordering_key: ordering.map(Bytes::from),
                    deliver_at_time: at,
                    replicate_to,
                    null_value: null,
                    uuid,
                    highest_sequence_id: highest,
                    chunk_id: chunk,
                    ..MessageMetadata::default()
                }
            },
        )
}

fn payload_frame() -> impl Strategy<Value = Frame> {
    (
        any::<bool>(),
        (any::<u64>(), any::<u64>()),
        metadata(),
        vec(any::<u8>(), 0..256),
        0..3u8,
        of((of(any::<u64>()), of(any::<u64>()))),
        message_id(),
        any::<u32>(),
    )
        .prop_map(
            |(is_send, (a, b), metadata, data, crc, entry, id, redelivery)| {
                let command = if is_send {
                    commands::send(ProducerId(a), SequenceId(b), 1)
                } else {
                    with(Type::Message, |c| {
                        c.message = boxed(proto::CommandMessage {
                            consumer_id: a,
                            message_id: id,
                            redelivery_count: Some(redelivery),
                            ..Default::default()
                        });
                    })
                };
                let checksum = match crc {
                    0 => Checksum::Absent,
                    1 => Checksum::Valid,
                    _ => Checksum::Mismatch {
                        carried: 0xdead_beef,
                        computed: 0,
                    },
                };
                let broker_entry_metadata = entry.map(|(t, i)| proto::BrokerEntryMetadata {
                    broker_timestamp: t,
                    index: i,
                });
                Frame {
                    command,
                    payload: Some(Box::new(Payload {
                        broker_entry_metadata,
                        checksum,
                        metadata,
                        data: data.into(),
                    })),
                }
            },
        )
}

fn any_frame() -> impl Strategy<Value = Frame> {
    prop_oneof![
        client_command().prop_map(Frame::simple),
        broker_command().prop_map(Frame::simple),
        payload_frame(),
    ]
}

/// What decode reports for a frame encoded with `frame.payload.checksum`.
fn as_received(mut frame: Frame, bytes: &[u8]) -> Frame {
    if let Some(p) = frame.payload.as_mut() {
        if let Checksum::Mismatch { carried, .. } = p.checksum {
            let covered =
                bytes.len() - (4 + prost::Message::encoded_len(&p.metadata) + p.data.len());
            let computed = checksum::crc32c(&[&bytes[covered..]]);
            p.checksum = Checksum::Mismatch { carried, computed };
        }
    }
    frame
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn every_frame_round_trips(frame in any_frame()) {
        let mut buf = BytesMut::new();
        encode(&frame, &mut buf).unwrap();
        prop_assert_eq!(buf.len(), encoded_len(&frame));
        let bytes = buf.clone().freeze();
        let decoded = decode(&mut buf, DEFAULT_MAX_FRAME_SIZE).unwrap().expect("a whole frame");
        prop_assert!(buf.is_empty());
        prop_assert_eq!(decoded, as_received(frame, &bytes));
    }

    #[test]
    fn the_head_and_the_payload_after_it_are_the_whole_frame(frame in any_frame()) {
        let (mut head, mut whole) = (BytesMut::new(), BytesMut::new());
        encode_head(&frame, &mut head).unwrap();
        encode(&frame, &mut whole).unwrap();
        let data = frame.payload.as_ref().map_or(&[][..], |p| &p.data[..]);
        prop_assert_eq!([&head[..], data].concat(), &whole[..]);
    }

    #[test]
    fn any_split_of_a_frame_stream_decodes_the_same(
        frames in vec(any_frame(), 1..6),
        cuts in vec(any::<prop::sample::Index>(), 0..8),
    ) {
        let mut stream = BytesMut::new();
        for f in &frames {
            encode(f, &mut stream).unwrap();
        }
        let stream = stream.freeze();
        let mut points: Vec<usize> = cuts.iter().map(|i| i.index(stream.len() + 1)).collect();
        points.sort_unstable();
        let mut buf = BytesMut::new();
        let mut got = 0;
        let mut last = 0;
        for end in points.into_iter().chain([stream.len()]) {
            buf.extend_from_slice(&stream[last..end]);
            last = end;
            while decode(&mut buf, DEFAULT_MAX_FRAME_SIZE).unwrap().is_some() {
                got += 1;
            }
        }
        prop_assert_eq!(got, frames.len());
        prop_assert!(buf.is_empty());
    }

    #[test]
    fn arbitrary_bytes_never_panic_nor_allocate_past_the_limit(
        bytes in vec(any::<u8>(), 0..2048),
        cuts in vec(any::<prop::sample::Index>(), 0..8),
        max in 8usize..4096,
    ) {
        let mut points: Vec<usize> = cuts.iter().map(|i| i.index(bytes.len() + 1)).collect();
        points.sort_unstable();
        let mut buf = BytesMut::new();
        let mut last = 0;
        'feed: for end in points.into_iter().chain([bytes.len()]) {
            buf.extend_from_slice(&bytes[last..end]);
            last = end;
            loop {
                match decode(&mut buf, max) {
                    Ok(Some(_)) => {}
                    Ok(None) => break,
                    Err(_) => break 'feed,
                }
                // Never more than the limit plus what was fed in at once.
                prop_assert!(buf.capacity() <= 2 * (max + bytes.len()) + 64);
            }
        }
        prop_assert!(buf.capacity() <= 2 * (max + bytes.len()) + 64);
    }

    #[test]
    fn member_metadata_decodes_as_prost_does(
        bytes in vec(
            prop_oneof![
                3 => prop::sample::select(vec![0x18u8, 0x20, 0x28, 0x30, 0x40, 0x48, 0x50, 0x80, 0xff, 0, 1]),
                1 => any::<u8>(),
            ],
            0..48,
        ),
    ) {
        prop_assert_eq!(
            batch::member_metadata(&bytes).ok(),
            <proto::SingleMessageMetadata as prost::Message>::decode(&bytes[..]).ok()
        );
    }

    #[test]
    fn batch_split_never_panics(bytes in vec(any::<u8>(), 0..512), count in any::<i32>()) {
        for member in batch::members(Bytes::from(bytes), count) {
            if member.is_err() { break; }
        }
    }
}
