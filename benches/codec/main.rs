//! Frame throughput of pulsar-wire's codec: encode of SEND and decode of
//! MESSAGE at 100 B, 1 KiB and 64 KiB, a batch's split into members, the
//! small commands (ACK, FLOW, PING), with crc32c alone over the same bytes
//! as the floor. Every figure is this thread's CPU time (`cpu.rs`).
//!
//! Run: `cargo bench --bench codec`. The same rows beside the `pulsar`
//! crate's codec, in one run: `benches/compare` (docs/performance.md).

mod cpu;
mod ours;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};

use cpu::ThreadCpu;

fn send_encode(c: &mut Criterion<ThreadCpu>) {
    let mut group = c.benchmark_group("send_encode");
    for case in ours::send_cases() {
        group.throughput(Throughput::Bytes(case.encoded.len() as u64));
        ours::send_rows(&mut group, &case);
    }
    group.finish();
}

fn message_decode(c: &mut Criterion<ThreadCpu>) {
    let mut group = c.benchmark_group("message_decode");
    for case in ours::decode_cases() {
        group.throughput(Throughput::Bytes(case.bytes.len() as u64));
        ours::decode_rows(&mut group, &case);
    }
    group.finish();
}

fn small_commands(c: &mut Criterion<ThreadCpu>) {
    let mut group = c.benchmark_group("small_commands");
    for case in ours::small_cases() {
        group.throughput(Throughput::Elements(1));
        ours::small_rows(&mut group, &case);
    }
    group.finish();
}

criterion_group! { name = benches; config = cpu::config(); targets = send_encode, message_decode, small_commands }
criterion_main!(benches);
