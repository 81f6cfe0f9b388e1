//! What every codec row measures: the CPU time of the benchmarking thread
//! (`CLOCK_THREAD_CPUTIME_ID`), not wall time. On a VM whose two cores
//! other processes share, wall time counts the slices in which this thread
//! waits for a core; CPU time leaves them out (what other processes do to
//! the caches still counts).

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use criterion::measurement::{Measurement, ValueFormatter};
use criterion::{Bencher, Criterion, Throughput};

/// Criterion's measurement of this thread's CPU time.
pub(crate) struct ThreadCpu;

/// The codec benches' settings: short runs, CPU time.
pub(crate) fn config() -> Criterion<ThreadCpu> {
    Criterion::default()
        .with_measurement(ThreadCpu)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(40)
}

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

/// Times `decode` taking frames, one per call, off a read buffer holding
/// a run of copies of `bytes`, as a connection's reader takes them off its
/// buffer. The buffer is filled, and the decoded values are dropped,
/// outside the timing, `chunk` frames at a time.
///
/// Unlike criterion's `iter_batched`, the values land in memory touched
/// before: `iter_batched` collects each batch's outputs in a fresh vector,
/// whose page faults (about 1 µs per 4 KiB on these VMs) would count in
/// proportion to the size of the decoded value rather than the work of
/// decoding it. Every codec is timed through this one harness.
pub(crate) fn time_decode<T>(
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
pub(crate) fn chunk_for(bytes: &Bytes) -> usize {
    (256 * 1024 / bytes.len()).clamp(1, 256)
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
