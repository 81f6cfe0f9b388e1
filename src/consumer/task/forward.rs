//! Dead-letter forwards, off the driver's loop: each publish runs in a task
//! of its own, and its result comes back through a channel the loop
//! selects on, so acks, flow and deliveries go on while it waits. The core
//! hears the result (`on_dead_letter_result`) and only then acks the
//! original; a failure makes it redeliver the original instead.

use super::*;
use crate::consumer::letters::Letters;

/// A finished dead-letter publish.
#[derive(Debug)]
pub(crate) struct Forwarded {
    /// The sub whose core asked for it.
    index: usize,
    /// The original message's id.
    origin: MessageId,
    /// The copy's id, or why it was not published.
    result: Result<MessageId, ConsumerError>,
}

/// The forwards in flight and the channel their results come back on.
#[derive(Debug)]
pub(crate) struct Forwards {
    letters: Option<Arc<Letters>>,
    done_tx: mpsc::UnboundedSender<Forwarded>,
    pub(super) done: mpsc::UnboundedReceiver<Forwarded>,
    in_flight: usize,
}

impl Forwards {
    /// Forwards through `letters` (`None`: the consumer has no dead-letter
    /// policy, and every forward fails at once).
    pub(crate) fn new(letters: Option<Arc<Letters>>) -> Self {
        let (done_tx, done) = mpsc::unbounded_channel();
        Self {
            letters,
            done_tx,
            done,
            in_flight: 0,
        }
    }

    /// Starts publishing the copy of `message`; false if there is nowhere
    /// to publish it.
    pub(super) fn start(&mut self, index: usize, origin: MessageId, message: Message) -> bool {
        let Some(letters) = self.letters.clone() else {
            return false;
        };
        self.in_flight += 1;
        let done = self.done_tx.clone();
        tokio::spawn(async move {
            let result = letters.forward(&message).await;
            let _ = done.send(Forwarded {
                index,
                origin,
                result,
            });
        });
        true
    }

    /// Closes the dead-letter and retry producers.
    pub(super) async fn close(&self) {
        if let Some(letters) = &self.letters {
            letters.close().await;
        }
    }
}

impl Driver {
    /// Tells the core how a forward ended, and carries out what follows
    /// (the original's ack, or its redelivery).
    pub(super) async fn on_forwarded(&mut self, forwarded: Forwarded) {
        let forwards = &mut self.settings.forwards;
        forwards.in_flight = forwards.in_flight.saturating_sub(1);
        let Forwarded {
            index,
            origin,
            result,
        } = forwarded;
        let Some(sub) = self.subs.get_mut(index) else {
            return;
        };
        let result = match result {
            Ok(copy) => {
                debug!(topic = %sub.name, %origin, %copy, "forwarded to the dead-letter topic");
                Ok(())
            }
            Err(e) => {
                warn!(topic = %sub.name, %origin, error = %e, "dead-letter forward failed; the message will be redelivered");
                Err(())
            }
        };
        sub.core.on_dead_letter_result(origin, result);
        self.run_actions(index).await;
    }

    /// Waits for every forward in flight and settles its original, so a
    /// closing consumer acks what it forwarded.
    pub(super) async fn settle_forwards(&mut self) {
        while self.settings.forwards.in_flight > 0 {
            match self.settings.forwards.done.recv().await {
                Some(forwarded) => self.on_forwarded(forwarded).await,
                None => return,
            }
        }
    }
}
