//! What the driver tells the consumer's stats, interceptors and
//! dead-letter history: one call per event, each from one place in the
//! driver. Without interceptors or a dead-letter policy a call is a
//! counter's increment and a check of an empty list.

use super::*;

impl Driver {
    /// `message` goes to the application now.
    pub(super) fn observe_delivery(&self, message: &Message) {
        self.settings.stats.received(message.payload().len());
        if let Some(letters) = self.settings.forwards.letters() {
            letters.delivered(message);
        }
        for interceptor in self.settings.interceptors.iter() {
            interceptor.before_consume(message);
        }
    }

    /// The application acked `id` of `topic`; the core recorded it.
    pub(super) fn observe_ack(&self, topic: &str, id: MessageId, cumulative: bool) {
        self.settings.stats.acked();
        if let Some(letters) = self.settings.forwards.letters() {
            letters.settled(id);
        }
        for interceptor in self.settings.interceptors.iter() {
            interceptor.on_acknowledge(topic, id, cumulative);
        }
    }

    /// The application nacked `id` of `topic`.
    pub(super) fn observe_nack(&self, topic: &str, id: MessageId) {
        self.settings.stats.nacked();
        for interceptor in self.settings.interceptors.iter() {
            interceptor.on_negative_acknowledge(topic, id);
        }
    }

    /// Sub `index`'s core ticked: the messages whose ack timeout expired.
    pub(super) fn observe_ack_timeouts(&self, index: usize) {
        let sub = &self.subs[index];
        let ids = sub.core.timed_out();
        if ids.is_empty() {
            return;
        }
        self.settings.stats.timed_out(ids.len());
        for interceptor in self.settings.interceptors.iter() {
            interceptor.on_ack_timeout(&sub.name, ids);
        }
    }
}
