//! The handle when a partition's task is gone: a close reads as
//! [`ProducerError::Closed`], a panic as [`ProducerError::TaskFailed`],
//! for `send` and for a receipt in flight.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::{Semaphore, mpsc};

use super::routing::Router;
use super::task::{Cmd, Lane};
use super::{HashingScheme, Producer, ProducerError, RoutingMode, WhenFull};

/// A producer whose one task takes a send, then ends: cleanly (the flag
/// set first, as the real task does) or by panicking.
fn producer(panics: bool) -> Producer {
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
    let memory = (Arc::new(Semaphore::new(1 << 20)), 1 << 20, WhenFull::Block);
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
