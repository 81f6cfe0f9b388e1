//! The handle when a partition's task is gone: a close reads as
//! [`ProducerError::Closed`], a panic as [`ProducerError::TaskFailed`],
//! for `send` and for a receipt in flight; a send that waits for memory
//! waits at most the send timeout.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::{Semaphore, mpsc};

use super::routing::Router;
use super::task::{Cmd, Lane};
use std::time::Duration;

use super::{HashingScheme, LimitExceeded, Memory, Producer, ProducerError, RoutingMode, WhenFull};

/// A producer whose one task takes a send, then ends: cleanly (the flag
/// set first, as the real task does) or by panicking.
fn producer(panics: bool) -> Producer {
    let memory = Memory {
        budget: Arc::new(Semaphore::new(1 << 20)),
        limit: 1 << 20,
        when_full: WhenFull::Block,
        wait: Duration::from_secs(30),
    };
    producer_with(panics, memory)
}

/// As [`producer`], taking from `memory`.
fn producer_with(panics: bool, memory: Memory) -> Producer {
    let (tx, mut rx) = mpsc::channel::<Cmd>(8);
    let ended = Arc::new(AtomicBool::new(false));
    let flag = ended.clone();
    tokio::spawn(async move {
        let first = rx.recv().await;
        if panics {
            panic!("a bug in the producer's task");
        }
        flag.store(true, Ordering::Release);
        drop((first, rx));
    });
    let router = Router::new(
        RoutingMode::default(),
        HashingScheme::default(),
        1,
        0,
        None,
        crate::clock::now(),
    );
    Producer::new(
        "t".into(),
        "t".into(),
        vec![Lane {
            tx,
            ended,
            topic: "t".into(),
        }],
        (router, false),
        memory,
        (
            Arc::new(crate::stats::ProducerRecorder::new(
                std::time::Duration::from_secs(60),
                crate::clock::now(),
            )),
            crate::interceptor::Chain::default(),
        ),
    )
}

#[tokio::test]
async fn a_panicked_task_fails_the_receipt_and_later_sends() {
    let producer = producer(true);
    let receipt = producer.send("a").await.expect("queued");
    assert!(matches!(receipt.await, Err(ProducerError::TaskFailed)));
    assert!(matches!(
        producer.send("b").await,
        Err(ProducerError::TaskFailed)
    ));
}

#[tokio::test]
async fn a_task_that_stopped_as_asked_is_closed() {
    let producer = producer(false);
    let receipt = producer.send("a").await.expect("queued");
    assert!(matches!(receipt.await, Err(ProducerError::Closed)));
}

#[tokio::test(start_paused = true)]
async fn a_send_that_gets_no_memory_within_the_send_timeout_fails() {
    let budget = Arc::new(Semaphore::new(100));
    // Everything held elsewhere (other producers, the receiver queues).
    let held = budget.clone().acquire_many_owned(100).await.expect("held");
    let memory = Memory {
        budget,
        limit: 100,
        when_full: WhenFull::Block,
        wait: Duration::from_secs(5),
    };
    let producer = producer_with(false, memory);
    let started = tokio::time::Instant::now();
    let refused = producer.send(vec![0_u8; 10]).await.expect_err("no memory");
    assert!(
        matches!(
            refused,
            ProducerError::Full(LimitExceeded::Memory {
                used: 100,
                limit: 100,
                ..
            })
        ),
        "{refused}"
    );
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(5),
        "the send timeout"
    );
    drop(held);
}
