//! The handle when its task is gone: a close reads as
//! [`ConsumerError::Closed`] (the stream ends), a panic as
//! [`ConsumerError::TaskFailed`] (the stream yields the error).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::StreamExt;
use tokio::sync::{mpsc, watch};

use super::{Consumer, ConsumerError, SubscriptionType, task};

/// A handle whose task takes one command, then ends: cleanly (the flag
/// set, as the real task does) or by panicking.
fn handle(panics: bool) -> Consumer {
    let (commands, mut mailbox) = mpsc::unbounded_channel();
    let ended = Arc::new(AtomicBool::new(false));
    let flag = ended.clone();
    tokio::spawn(async move {
        let first: Option<Box<task::Command>> = mailbox.recv().await;
        if panics {
            panic!("a bug in the consumer's task");
        }
        // As the real task: the flag is set before anything it held goes.
        flag.store(true, Ordering::Release);
        drop((first, mailbox));
    });
    let (_, activity) = watch::channel(Vec::new());
    Consumer {
        commands,
        shelf: Arc::new(task::Shelf::closed()),
        pending: None,
        pending_batch: None,
        subscription_type: SubscriptionType::Shared,
        topics: watch::channel(Arc::default()).1,
        activity,
        letters: None,
        ack_receipts: false,
        ended,
        stats: Arc::new(crate::stats::ConsumerRecorder::new(
            std::time::Duration::from_secs(60),
            crate::clock::now(),
        )),
    }
}

#[tokio::test]
async fn a_panicked_task_is_an_error_never_a_clean_end() {
    let mut consumer = handle(true);
    assert!(matches!(
        consumer.receive().await,
        Err(ConsumerError::TaskFailed)
    ));
    assert!(matches!(
        consumer.next().await,
        Some(Err(ConsumerError::TaskFailed))
    ));
    assert!(matches!(
        consumer.close().await,
        Err(ConsumerError::TaskFailed)
    ));
}

#[tokio::test]
async fn a_task_that_stopped_as_asked_is_closed() {
    let mut consumer = handle(false);
    assert!(matches!(
        consumer.receive().await,
        Err(ConsumerError::Closed)
    ));
    assert!(consumer.next().await.is_none(), "the stream ends");
    consumer
        .close()
        .await
        .expect("closing a closed consumer does nothing");
}
