//! What the driver tells the consumer's stats, interceptors and
//! dead-letter history: one call per event, each from one place (messages
//! handed out and acks go through the shelf's observers, see shelf.rs).
//! Without interceptors or a dead-letter policy a call is a counter's
//! increment and a check of an empty list.

use super::*;

impl Driver {
    /// The application acked `id` of `topic`; the core recorded it.
    pub(super) fn observe_ack(&self, topic: &str, id: MessageId, cumulative: bool) {
        self.shelf.observers.acked(topic, id, cumulative);
    }

    /// The application nacked `id` of `topic`.
    pub(super) fn observe_nack(&self, topic: &str, id: MessageId) {
        self.shelf.observers.nacked(topic, id);
    }

    /// Sub `index`'s core ticked: the messages whose ack timeout expired.
    pub(super) fn observe_ack_timeouts(&self, index: usize) {
        // Interceptors run without the shelf's lock: they may ack.
        let ids = {
            let shelved = self.shelf.lock();
            let ids = shelved.slots[index].core.timed_out();
            self.settings.stats.timed_out(ids.len());
            if ids.is_empty() || self.settings.interceptors.is_empty() {
                return;
            }
            ids.to_vec()
        };
        let name = &self.subs[index].name;
        for interceptor in self.settings.interceptors.iter() {
            interceptor.on_ack_timeout(name, &ids);
        }
    }
}
