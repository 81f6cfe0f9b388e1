//! The subs' mailboxes, read as one stream of broker events.
//!
//! Most consumers read one topic: its mailbox is polled directly. With
//! more (partitions, a pattern, a mailbox of a reconnect not ended yet)
//! they go to a `SelectAll`, which polls only the mailboxes that were
//! woken, but allocates a node per event as it hands each one back.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures::stream::SelectAll;
use futures::{Stream, StreamExt};

use super::leave::SubKey;
use crate::connection::ConsumerEvent;

/// One sub's events, tagged with its key and generation.
pub(super) type Mailbox = Pin<Box<dyn Stream<Item = (SubKey, u64, ConsumerEvent)> + Send + Sync>>;

/// Every sub's mailbox. Ends (yields `None`) while there are none.
#[derive(Default)]
pub(super) struct Events {
    /// The only mailbox, while there is just one (`many` is empty then).
    single: Option<Mailbox>,
    many: SelectAll<Mailbox>,
}

impl Events {
    /// Adds a mailbox; it is dropped once it ends.
    pub(super) fn push(&mut self, mailbox: Mailbox) {
        if self.single.is_none() && self.many.is_empty() {
            self.single = Some(mailbox);
            return;
        }
        if let Some(single) = self.single.take() {
            self.many.push(single);
        }
        self.many.push(mailbox);
    }
}

impl Stream for Events {
    type Item = (SubKey, u64, ConsumerEvent);

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let Some(single) = self.single.as_mut() else {
            return self.many.poll_next_unpin(cx);
        };
        let polled = single.poll_next_unpin(cx);
        if let Poll::Ready(None) = polled {
            self.single = None;
        }
        polled
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mailbox(key: u64, count: usize) -> Mailbox {
        let key = SubKey(key);
        let events = (0..count).map(move |_| (key, 0, ConsumerEvent::ReachedEndOfTopic));
        Box::pin(futures::stream::iter(events))
    }

    /// The keys of the events ready now, in order.
    fn keys(events: &mut Events) -> Vec<u64> {
        let mut seen = Vec::new();
        while let Some(Some((SubKey(key), _, _))) = futures::FutureExt::now_or_never(events.next())
        {
            seen.push(key);
        }
        seen
    }

    #[test]
    fn one_mailbox_is_read_to_its_end() {
        let mut events = Events::default();
        events.push(mailbox(0, 3));
        assert_eq!(keys(&mut events), [0, 0, 0]);
        assert!(events.single.is_none());
    }

    #[test]
    fn a_second_mailbox_joins_the_first_and_both_are_read() {
        let mut events = Events::default();
        events.push(mailbox(0, 2));
        events.push(mailbox(1, 2));
        assert!(events.single.is_none());
        let mut seen = keys(&mut events);
        seen.sort_unstable();
        assert_eq!(seen, [0, 0, 1, 1]);
    }

    #[test]
    fn without_mailboxes_the_stream_ends_and_takes_new_ones() {
        let mut events = Events::default();
        assert!(keys(&mut events).is_empty());
        events.push(mailbox(3, 1));
        assert_eq!(keys(&mut events), [3]);
    }
}
