//! The library's own figures in the `perf` summaries: what
//! `Producer::stats()` and `Consumer::stats()` counted over the run, and,
//! with `--count-hooks`, what a counting interceptor saw (the interceptor
//! is there to measure what hooks cost).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use pulsar_wire::interceptor::{ConsumerInterceptor, ProducerInterceptor};
use pulsar_wire::producer::{ProducerError, ProducerMessage};
use pulsar_wire::stats::{ConsumerStats, LatencyPercentiles, ProducerStats};
use pulsar_wire::{Message, MessageId};
use serde_json::{Value, json};

/// Counts every hook call; installed by `--count-hooks`.
#[derive(Debug, Default)]
pub(crate) struct HookCounts {
    calls: AtomicU64,
}

impl HookCounts {
    fn hit(&self) {
        self.calls.fetch_add(1, Relaxed);
    }

    /// Hook calls so far.
    pub(crate) fn calls(&self) -> u64 {
        self.calls.load(Relaxed)
    }
}

impl ProducerInterceptor for HookCounts {
    fn before_send(&self, _topic: &str, message: ProducerMessage) -> ProducerMessage {
        self.hit();
        message
    }
    fn on_send_acknowledgement(&self, _topic: &str, _outcome: Result<MessageId, &ProducerError>) {
        self.hit();
    }
}

impl ConsumerInterceptor for HookCounts {
    fn before_consume(&self, _message: &Message) {
        self.hit();
    }
    fn on_acknowledge(&self, _topic: &str, _id: MessageId, _cumulative: bool) {
        self.hit();
    }
    fn on_negative_acknowledge(&self, _topic: &str, _id: MessageId) {
        self.hit();
    }
    fn on_ack_timeout(&self, _topic: &str, _ids: &[MessageId]) {
        self.hit();
    }
}

fn us(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

fn latency(l: &LatencyPercentiles) -> Value {
    json!({
        "count": l.count,
        "p50_us": us(l.p50),
        "p75_us": us(l.p75),
        "p95_us": us(l.p95),
        "p99_us": us(l.p99),
        "p999_us": us(l.p999),
        "max_us": us(l.max),
    })
}

/// A producer's figures, with the hook calls if counted.
pub(crate) fn producer(s: &ProducerStats, hooks: Option<u64>) -> Value {
    json!({
        "messages_sent": s.total.messages_sent,
        "bytes_sent": s.total.bytes_sent,
        "send_failures": s.total.send_failures,
        "receipts": s.total.receipts,
        "pending_messages": s.pending_messages,
        "pending_bytes": s.pending_bytes,
        "send_latency": latency(&s.send_latency),
        "hook_calls": hooks,
    })
}

/// A consumer's figures, with the hook calls if counted.
pub(crate) fn consumer(s: &ConsumerStats, hooks: Option<u64>) -> Value {
    let t = &s.total;
    json!({
        "messages_received": t.messages_received,
        "bytes_received": t.bytes_received,
        "acks": t.acks,
        "nacks": t.nacks,
        "ack_timeouts": t.ack_timeouts,
        "dead_letters": t.dead_letters,
        "retries": t.retries,
        "hook_calls": hooks,
    })
}

/// The figures as one line for a person: `key value` pairs, latencies in ms.
pub(crate) fn text(figures: &Value) -> String {
    let mut parts = Vec::new();
    if let Value::Object(map) = figures {
        for (k, v) in map {
            match v {
                Value::Object(lat) => {
                    let ms = |k: &str| lat[k].as_f64().unwrap_or(0.0) / 1000.0;
                    parts.push(format!(
                        "{k} (ms) p50 {:.3} p95 {:.3} p99 {:.3} max {:.3}",
                        ms("p50_us"),
                        ms("p95_us"),
                        ms("p99_us"),
                        ms("max_us")
                    ));
                }
                Value::Null => {}
                v => parts.push(format!("{k} {v}")),
            }
        }
    }
    format!("client stats: {}", parts.join(" | "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_read_as_a_line() {
        let f = json!({"messages_sent": 3, "hook_calls": null, "send_latency": {"p50_us": 1500, "p95_us": 2000, "p99_us": 3000, "max_us": 4000}});
        let line = text(&f);
        assert!(line.contains("messages_sent 3"), "{line}");
        assert!(line.contains("send_latency (ms) p50 1.500"), "{line}");
        assert!(!line.contains("hook_calls"), "{line}");
        let hooks = HookCounts::default();
        ConsumerInterceptor::on_ack_timeout(&hooks, "t", &[]);
        assert_eq!(hooks.calls(), 1);
    }
}
