//! Frame-throughput benchmark: pulsar-wire's codec, the `pulsar` crate
//! 6.9.1's codec, and crc32c alone over the same bytes (the floor), in one
//! run so the machine's noise hits all three alike.
//!
//! Every figure is the CPU time of the benchmarking thread ([`ThreadCpu`]),
//! so the slices in which the thread waits for a shared core stay out.
//!
//! `scripts/bench-report` turns the results into the table of
//! docs/performance.md. Run from the repository's root:
//! `cargo bench --manifest-path bench/Cargo.toml --bench codec`.

use bytes::{Bytes, BytesMut};
use criterion::measurement::{Measurement, ValueFormatter};
use criterion::{
    BatchSize, Bencher, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main,
};
use pulsar_wire::MessageId;
use pulsar_wire::ids::{ConsumerId, ProducerId, SequenceId};
use pulsar_wire::proto::base_command::Type;
use pulsar_wire::proto::command_ack::AckType;
use pulsar_wire::proto::{self, BaseCommand, MessageMetadata, SingleMessageMetadata};
use pulsar_wire::wire::{self, Checksum, Frame, Payload, batch, checksum, commands};
use std::hint::black_box;
use std::time::Duration;
use tokio_util::codec::{Decoder, Encoder};

const MAX: usize = wire::DEFAULT_MAX_FRAME_SIZE;

fn metadata(sequence_id: u64) -> MessageMetadata {
    MessageMetadata {
        producer_name: "bench-producer".into(),
        sequence_id,
        publish_time: 1_700_000_000_000,
        ..MessageMetadata::default()
    }
}

/// A MESSAGE frame as Apache Pulsar sends it (with magic and crc32c).
fn message_frame(metadata: MessageMetadata, data: Bytes) -> Bytes {
    let command = BaseCommand {
        r#type: Type::Message as i32,
        message: Some(Box::new(proto::CommandMessage {
            consumer_id: 1,
            message_id: MessageId::new(7, 42).to_proto(),
            ..proto::CommandMessage::default()
        })),
        ..BaseCommand::default()
    };
    let frame = Frame {
        command,
        payload: Some(Box::new(Payload {
            broker_entry_metadata: None,
            checksum: Checksum::Valid,
            metadata,
            data,
        })),
    };
    let mut buf = BytesMut::new();
    wire::encode(&frame, &mut buf).expect("encode");
    buf.freeze()
}

fn batch_of(count: usize, size: usize) -> (MessageMetadata, Bytes) {
    let mut payload = BytesMut::new();
    let body = vec![b'x'; size];
    for i in 0..count {
        let member = SingleMessageMetadata {
            payload_size: size as i32,
            sequence_id: Some(i as u64),
            ..SingleMessageMetadata::default()
        };
        batch::write_member(&member, &body, &mut payload);
    }
    let meta = MessageMetadata {
        num_messages_in_batch: Some(count as i32),
        ..metadata(0)
    };
    (meta, payload.freeze())
}

fn theirs_decode(bytes: &Bytes) -> pulsar::message::Message {
    let mut buf = BytesMut::from(&bytes[..]);
    pulsar::message::Codec
        .decode(&mut buf)
        .expect("their decode")
        .expect("whole frame")
}

fn send_encode(c: &mut Criterion<ThreadCpu>) {
    let mut group = c.benchmark_group("send_encode");
    for (label, size) in [("100B", 100), ("1KiB", 1024), ("64KiB", 64 * 1024)] {
        let data = Bytes::from(vec![b'p'; size]);
        let command = commands::send(ProducerId(1), SequenceId(9), 1);
        let meta = metadata(9);
        let mut ours_bytes = BytesMut::new();
        wire::encode_payload(&command, &meta, &data, &mut ours_bytes).expect("encode");
        group.throughput(Throughput::Bytes(ours_bytes.len() as u64));

        let mut dst = BytesMut::with_capacity(2 * ours_bytes.len());
        group.bench_function(BenchmarkId::new("pulsar-wire", label), |b| {
            b.iter(|| {
                dst.clear();
                wire::encode_payload(black_box(&command), &meta, &data, &mut dst).expect("encode");
                black_box(&dst);
            })
        });

        // Zero-copy, what the connection's data lane does: the head goes in
        // `dst`, the payload stays where it is (the connection writes both
        // with one vectored write).
        let frame = Frame {
            command: command.clone(),
            payload: Some(Box::new(Payload {
                broker_entry_metadata: None,
                checksum: Checksum::Valid,
                metadata: meta.clone(),
                data: data.clone(),
            })),
        };
        group.bench_function(BenchmarkId::new("pulsar-wire-zero-copy", label), |b| {
            b.iter(|| {
                dst.clear();
                wire::encode_head(black_box(&frame), &mut dst).expect("encode");
                black_box((&dst, &frame));
            })
        });

        let theirs = theirs_decode(&ours_bytes.clone().freeze());
        group.bench_function(BenchmarkId::new("pulsar-crate", label), |b| {
            b.iter_batched(
                || theirs.clone(),
                |msg| {
                    dst.clear();
                    pulsar::message::Codec
                        .encode(msg, &mut dst)
                        .expect("their encode");
                    black_box(&dst);
                },
                BatchSize::SmallInput,
            )
        });

        let covered =
            &ours_bytes[ours_bytes.len() - (4 + prost::Message::encoded_len(&meta) + size)..];
        group.bench_function(BenchmarkId::new("crc32c-floor", label), |b| {
            b.iter(|| black_box(checksum::crc32c(&[black_box(covered)])))
        });
    }
    group.finish();
}

fn message_decode(c: &mut Criterion<ThreadCpu>) {
    let mut group = c.benchmark_group("message_decode");
    let single = |size: usize| message_frame(metadata(1), Bytes::from(vec![b'm'; size]));
    let (batch_meta, batch_data) = batch_of(100, 100);
    let cases = [
        ("1KiB", single(1024), 1),
        ("64KiB", single(64 * 1024), 1),
        ("batch100x100B", message_frame(batch_meta, batch_data), 100),
    ];
    for (label, bytes, members) in cases {
        group.throughput(Throughput::Bytes(bytes.len() as u64));
        // Decode alone, the same work as the pulsar crate's figure below.
        group.bench_function(BenchmarkId::new("pulsar-wire", label), |b| {
            time_decode(b, &bytes, chunk_for(&bytes), |buf| {
                wire::decode(buf, MAX).expect("decode").expect("whole")
            })
        });
        if members > 1 {
            // Decode and split into members: what a consumer must do. The
            // pulsar crate's splitter is not public, so this row has no
            // figure of theirs to compare with.
            group.bench_function(BenchmarkId::new("pulsar-wire-split", label), |b| {
                // Four batches at a time: their members' vectors stay in
                // memory the allocator keeps.
                time_decode(b, &bytes, 4, |buf| {
                    let frame = wire::decode(buf, MAX).expect("decode").expect("whole");
                    let payload = frame.payload.expect("payload");
                    // As the consumer does: room for the announced count.
                    let mut split = Vec::with_capacity(members as usize);
                    for member in batch::members(payload.data.clone(), members) {
                        split.push(member.expect("member"));
                    }
                    let members = split;
                    (payload, members) // dropped outside the timing
                })
            });
        }
        group.bench_function(BenchmarkId::new("pulsar-crate", label), |b| {
            time_decode(b, &bytes, chunk_for(&bytes), |buf| {
                pulsar::message::Codec.decode(buf).expect("decode")
            })
        });
        let covered = &bytes[bytes.len() - covered_len(&bytes)..];
        group.bench_function(BenchmarkId::new("crc32c-floor", label), |b| {
            b.iter(|| black_box(checksum::crc32c(&[black_box(covered)])))
        });
    }
    group.finish();
}

/// Times `decode` taking frames, one per call, off a read buffer holding
/// a run of copies of `bytes`, as a connection's reader takes them off its
/// buffer. The buffer is filled, and the decoded values are dropped,
/// outside the timing, `chunk` frames at a time.
///
/// Unlike criterion's `iter_batched`, the values land in memory touched
/// before: `iter_batched` collects each batch's outputs in a fresh vector,
/// whose page faults (about 1 µs per 4 KiB on these VMs) would count in
/// proportion to the size of the decoded value rather than the work of
/// decoding it. Both codecs are timed through this one harness.
fn time_decode<T>(
    b: &mut Bencher<'_, ThreadCpu>,
    bytes: &Bytes,
    chunk: usize,
    mut decode: impl FnMut(&mut BytesMut) -> T,
) {
    let mut outputs: Vec<T> = Vec::with_capacity(chunk);
    b.iter_custom(|iters| {
        let mut timed = Duration::ZERO;
        let mut left = iters;
        while left > 0 {
            let n = left.min(chunk as u64) as usize;
            let mut stream = BytesMut::with_capacity(n * bytes.len());
            for _ in 0..n {
                stream.extend_from_slice(bytes);
            }
            let start = thread_cpu();
            for _ in 0..n {
                outputs.push(decode(&mut stream));
            }
            timed += thread_cpu() - start;
            assert!(stream.is_empty());
            outputs.clear();
            left -= n as u64;
        }
        timed
    });
}

/// Frames per filled read buffer: about 256 KiB of them, at most 256.
fn chunk_for(bytes: &Bytes) -> usize {
    (256 * 1024 / bytes.len()).clamp(1, 256)
}

/// What every row measures: the time this thread spends on a CPU
/// (`CLOCK_THREAD_CPUTIME_ID`), not wall time. On a VM whose two cores
/// other processes share, wall time counts the slices in which this
/// thread waits for a core; CPU time leaves them out (what other processes
/// do to the caches still counts).
struct ThreadCpu;

/// This thread's CPU time so far.
fn thread_cpu() -> Duration {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    assert_eq!(rc, 0, "CLOCK_THREAD_CPUTIME_ID");
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

impl Measurement for ThreadCpu {
    type Intermediate = Duration;
    type Value = Duration;

    fn start(&self) -> Duration {
        thread_cpu()
    }
    fn end(&self, start: Duration) -> Duration {
        thread_cpu() - start
    }
    fn add(&self, a: &Duration, b: &Duration) -> Duration {
        *a + *b
    }
    fn zero(&self) -> Duration {
        Duration::ZERO
    }
    fn to_f64(&self, value: &Duration) -> f64 {
        value.as_nanos() as f64
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        &CpuNanos
    }
}

/// Prints CPU nanoseconds as they are, and rates per CPU second.
struct CpuNanos;

impl ValueFormatter for CpuNanos {
    fn scale_values(&self, _typical: f64, _values: &mut [f64]) -> &'static str {
        "ns (CPU)"
    }
    fn scale_throughputs(
        &self,
        _typical: f64,
        throughput: &Throughput,
        values: &mut [f64],
    ) -> &'static str {
        let (per, unit) = match *throughput {
            Throughput::Bytes(n) | Throughput::BytesDecimal(n) => (n as f64 / 1e6, "MB/s (CPU)"),
            Throughput::Bits(n) => (n as f64 / 1e6, "Mbit/s (CPU)"),
            Throughput::Elements(n) | Throughput::ElementsAndBytes { elements: n, .. } => {
                (n as f64 / 1e6, "M elem/s (CPU)")
            }
        };
        for v in values.iter_mut() {
            *v = per * 1e9 / *v;
        }
        unit
    }
    fn scale_for_machines(&self, _values: &mut [f64]) -> &'static str {
        "ns"
    }
}

/// Bytes covered by the checksum of an encoded payload frame.
fn covered_len(frame: &Bytes) -> usize {
    let decoded = wire::decode(&mut BytesMut::from(&frame[..]), MAX)
        .expect("decode")
        .expect("whole");
    let payload = decoded.payload.expect("payload");
    4 + prost::Message::encoded_len(&payload.metadata) + payload.data.len()
}

fn small_commands(c: &mut Criterion<ThreadCpu>) {
    let mut group = c.benchmark_group("small_commands");
    let cases = [
        (
            "ACK",
            commands::ack(
                ConsumerId(3),
                [MessageId::new(7, 42).to_proto()],
                AckType::Individual,
                None,
            ),
        ),
        ("FLOW", commands::flow(ConsumerId(3), 500)),
        ("PING", commands::ping()),
    ];
    for (label, command) in cases {
        group.throughput(Throughput::Elements(1));
        let mut dst = BytesMut::with_capacity(256);
        group.bench_function(BenchmarkId::new("pulsar-wire/encode", label), |b| {
            b.iter(|| {
                dst.clear();
                wire::encode_command(black_box(&command), &mut dst).expect("encode");
            })
        });
        let mut bytes = BytesMut::new();
        wire::encode_command(&command, &mut bytes).expect("encode");
        let bytes = bytes.freeze();
        let theirs = theirs_decode(&bytes);
        group.bench_function(BenchmarkId::new("pulsar-crate/encode", label), |b| {
            b.iter_batched(
                || theirs.clone(),
                |msg| {
                    dst.clear();
                    pulsar::message::Codec
                        .encode(msg, &mut dst)
                        .expect("encode");
                },
                BatchSize::SmallInput,
            )
        });
        group.bench_function(BenchmarkId::new("pulsar-wire/decode", label), |b| {
            time_decode(b, &bytes, chunk_for(&bytes), |buf| {
                wire::decode(buf, MAX).expect("decode")
            })
        });
        group.bench_function(BenchmarkId::new("pulsar-crate/decode", label), |b| {
            time_decode(b, &bytes, chunk_for(&bytes), |buf| {
                pulsar::message::Codec.decode(buf).expect("decode")
            })
        });
    }
    group.finish();
}

fn config() -> Criterion<ThreadCpu> {
    Criterion::default()
        .with_measurement(ThreadCpu)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(40)
}

criterion_group! { name = benches; config = config(); targets = send_encode, message_decode, small_commands }
criterion_main!(benches);
