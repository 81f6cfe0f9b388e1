//! The client's memory limit (Java's `memoryLimit`): the payload bytes its
//! producers hold unanswered and its consumers' receiver queues hold,
//! together.
//!
//! Receiver queues may take at most half of it. A queue that fills while
//! a producer of the same client waits for memory drains only when the
//! application receives again; an application that receives, sends, waits
//! for the receipt and acks (a relay, a transaction, a retry topic) would
//! never receive again if the queues held the whole limit. With half left
//! to the producers, such a loop is slowed by the limit, never stopped.

use std::future::Future;
use std::sync::Arc;

use tokio::sync::Semaphore;

/// The receiver queues' part of the client's memory limit: bytes they take
/// come out of both the whole limit and their share of it.
#[derive(Debug)]
pub(crate) struct QueueBudget {
    /// Bytes free of the whole limit (producers take from it too).
    total: Arc<Semaphore>,
    /// Bytes free of the queues' share.
    share: Arc<Semaphore>,
    /// Held by the one consumer waiting on the semaphores for room: the
    /// permit a wait takes and gives back goes to the next waiter in line,
    /// so among several waiters one free byte would pass from one to the
    /// next for ever, never free for a queue to take.
    turn: Arc<tokio::sync::Mutex<()>>,
}

impl QueueBudget {
    /// The queues' part of `total`, a limit of `limit` bytes: half of it.
    pub(crate) fn new(total: Arc<Semaphore>, limit: usize) -> Self {
        Self::with_share(total, (limit / 2).max(1))
    }

    /// The queues' part of `total`, at most `share` bytes.
    pub(crate) fn with_share(total: Arc<Semaphore>, share: usize) -> Self {
        Self {
            total,
            share: Arc::new(Semaphore::new(share)),
            turn: Arc::new(tokio::sync::Mutex::new(())),
        }
    }

    /// Takes up to `wanted` bytes, as many as both the whole limit and the
    /// queues' share have free; returns how many it took.
    pub(crate) fn take(&self, wanted: usize) -> usize {
        let from_share = self.share.forget_permits(wanted);
        let taken = self.total.forget_permits(from_share);
        if taken < from_share {
            self.share.add_permits(from_share - taken);
        }
        taken
    }

    /// Gives back `bytes` taken before.
    pub(crate) fn give(&self, bytes: usize) {
        if bytes > 0 {
            self.total.add_permits(bytes);
            self.share.add_permits(bytes);
        }
    }

    /// Whether nothing more can be taken now (the share or the whole limit
    /// is used up).
    pub(crate) fn used_up(&self) -> bool {
        self.share.available_permits() == 0 || self.total.available_permits() == 0
    }

    /// Resolves once a byte can be taken again (taking nothing).
    pub(crate) fn room(&self) -> impl Future<Output = ()> + Send + Sync + 'static {
        let (share, total, turn) = (self.share.clone(), self.total.clone(), self.turn.clone());
        async move {
            let _turn = turn.lock_owned().await;
            // Each released at once: the queues take what they need when
            // they next sync.
            drop(share.acquire_owned().await);
            drop(total.acquire_owned().await);
        }
    }

    /// Bytes free of the queues' share, for tests.
    #[cfg(test)]
    pub(crate) fn share_free(&self) -> usize {
        self.share.available_permits()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queues_take_at_most_their_share_and_what_the_limit_has_free() {
        let total = Arc::new(Semaphore::new(100));
        let queues = QueueBudget::new(total.clone(), 100);
        assert_eq!(queues.take(80), 50, "half the limit");
        assert!(queues.used_up());
        assert_eq!(
            total.available_permits(),
            50,
            "the other half for producers"
        );
        queues.give(30);
        assert_eq!((queues.share_free(), total.available_permits()), (30, 80));
        // Producers hold 70 meanwhile: 10 are free of the whole.
        total.forget_permits(70);
        assert_eq!(queues.take(25), 10);
        assert_eq!(
            queues.share_free(),
            20,
            "what the whole could not cover stays"
        );
        assert!(queues.used_up());
    }

    #[tokio::test(start_paused = true)]
    async fn consumers_waiting_for_room_do_not_pass_a_byte_between_them_for_ever() {
        // Each waits as a consumer does: for room, then takes what it can.
        let total = Arc::new(Semaphore::new(10));
        let queues = Arc::new(QueueBudget::new(total, 10));
        assert_eq!(queues.take(5), 5);
        let waits = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let waiting: Vec<_> = (0..2)
            .map(|_| {
                let (queues, waits) = (queues.clone(), waits.clone());
                tokio::spawn(async move {
                    loop {
                        queues.room().await;
                        waits.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        if queues.take(5) > 0 {
                            return;
                        }
                    }
                })
            })
            .collect();
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
        queues.give(1);
        for _ in 0..1000 {
            tokio::task::yield_now().await;
        }
        let done = waiting.iter().filter(|w| w.is_finished()).count();
        assert_eq!(done, 1, "one took the byte");
        let waited = waits.load(std::sync::atomic::Ordering::Relaxed);
        assert!(waited <= 2, "woken {waited} times for one byte");
        for w in waiting {
            w.abort();
        }
    }

    #[tokio::test]
    async fn room_waits_for_both_the_share_and_the_whole() {
        use futures::FutureExt;
        let total = Arc::new(Semaphore::new(10));
        let queues = QueueBudget::new(total.clone(), 10);
        assert_eq!(queues.take(10), 5);
        let room = queues.room();
        tokio::pin!(room);
        assert!((&mut room).now_or_never().is_none());
        queues.give(1);
        room.await;
        assert_eq!(queues.share_free(), 1, "nothing taken");
    }
}
