//! Frame throughput side by side: pulsar-wire's codec, the `pulsar` crate
//! 6.9.1's codec, and crc32c alone over the same bytes (the floor), in one
//! run so the machine's noise hits all three alike. pulsar-wire's rows and
//! the measurement are those of the crate's own bench (`benches/codec/`).
//!
//! `scripts/bench-report` turns the results into the table of
//! docs/performance.md. Run from the repository's root:
//! `cargo bench --manifest-path benches/compare/Cargo.toml --bench codec`.

#[path = "../../codec/cpu.rs"]
mod cpu;
#[path = "../../codec/ours.rs"]
mod ours;

use bytes::{Bytes, BytesMut};
use criterion::{BatchSize, BenchmarkGroup, BenchmarkId, Criterion, Throughput};
use criterion::{criterion_group, criterion_main};
use std::hint::black_box;
use tokio_util::codec::{Decoder, Encoder};

use cpu::{ThreadCpu, chunk_for, time_decode};

fn theirs_decode(bytes: &Bytes) -> pulsar::message::Message {
    let mut buf = BytesMut::from(&bytes[..]);
    pulsar::message::Codec
        .decode(&mut buf)
        .expect("their decode")
        .expect("whole frame")
}

/// The `pulsar` crate's encode of the message `encoded` holds.
fn their_encode(group: &mut BenchmarkGroup<'_, ThreadCpu>, id: BenchmarkId, encoded: &Bytes) {
    let theirs = theirs_decode(encoded);
    let mut dst = BytesMut::with_capacity(2 * encoded.len());
    group.bench_function(id, |b| {
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
}

/// The `pulsar` crate's decode of `bytes`, through the same harness as ours.
fn their_decode(group: &mut BenchmarkGroup<'_, ThreadCpu>, id: BenchmarkId, bytes: &Bytes) {
    group.bench_function(id, |b| {
        time_decode(b, bytes, chunk_for(bytes), |buf| {
            pulsar::message::Codec.decode(buf).expect("decode")
        })
    });
}

fn send_encode(c: &mut Criterion<ThreadCpu>) {
    let mut group = c.benchmark_group("send_encode");
    for case in ours::send_cases() {
        group.throughput(Throughput::Bytes(case.encoded.len() as u64));
        ours::send_rows(&mut group, &case);
        their_encode(
            &mut group,
            BenchmarkId::new("pulsar-crate", case.label),
            &case.encoded,
        );
    }
    group.finish();
}

fn message_decode(c: &mut Criterion<ThreadCpu>) {
    let mut group = c.benchmark_group("message_decode");
    for case in ours::decode_cases() {
        group.throughput(Throughput::Bytes(case.bytes.len() as u64));
        ours::decode_rows(&mut group, &case);
        // The pulsar crate's batch splitter is not public, so the split row
        // has no figure of theirs to compare with.
        their_decode(
            &mut group,
            BenchmarkId::new("pulsar-crate", case.label),
            &case.bytes,
        );
    }
    group.finish();
}

fn small_commands(c: &mut Criterion<ThreadCpu>) {
    let mut group = c.benchmark_group("small_commands");
    for case in ours::small_cases() {
        group.throughput(Throughput::Elements(1));
        ours::small_rows(&mut group, &case);
        their_encode(
            &mut group,
            BenchmarkId::new("pulsar-crate/encode", case.label),
            &case.encoded,
        );
        their_decode(
            &mut group,
            BenchmarkId::new("pulsar-crate/decode", case.label),
            &case.encoded,
        );
    }
    group.finish();
}

criterion_group! { name = benches; config = cpu::config(); targets = send_encode, message_decode, small_commands }
criterion_main!(benches);
