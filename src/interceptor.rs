//! Interceptors: the application's code called as messages go out and come
//! in, as the Java client's `ProducerInterceptor` and `ConsumerInterceptor`.
//!
//! Set them on the builders
//! ([`ProducerBuilder::interceptor`](crate::producer::ProducerBuilder::interceptor),
//! [`ConsumerBuilder::interceptor`](crate::ConsumerBuilder::interceptor));
//! several are called in the order they were added. Every hook has an
//! empty default, so an interceptor implements only what it needs. A
//! producer or consumer without interceptors pays nothing for them: no
//! allocation and no call per message, only a check of an empty list.
//!
//! Hooks run inline, in the application's call that causes them (a
//! `receive`, an `ack`, a `nack`) or in the producer's or consumer's task:
//! keep them short and never block in them (hand heavy work to a channel).
//! A panic in a hook is a panic of that call or of that task.
//!
//! # Examples
//! ```no_run
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicU64, Ordering};
//! use pulsar_wire::MessageId;
//! use pulsar_wire::interceptor::ConsumerInterceptor;
//!
//! #[derive(Debug, Default)]
//! struct Counting {
//!     delivered: AtomicU64,
//!     acked: AtomicU64,
//! }
//!
//! impl ConsumerInterceptor for Counting {
//!     fn before_consume(&self, _message: &pulsar_wire::Message) {
//!         self.delivered.fetch_add(1, Ordering::Relaxed);
//!     }
//!     fn on_acknowledge(&self, _topic: &str, _id: MessageId, _cumulative: bool) {
//!         self.acked.fetch_add(1, Ordering::Relaxed);
//!     }
//! }
//!
//! # async fn demo(client: pulsar_wire::Client) -> Result<(), pulsar_wire::Error> {
//! let counting = Arc::new(Counting::default());
//! let consumer = client
//!     .consumer("orders", "billing")
//!     .interceptor(counting.clone()) // an `Arc` of an interceptor is one too
//!     .subscribe()
//!     .await?;
//! # Ok(()) }
//! ```

use std::fmt;
use std::sync::Arc;

use crate::consumer::Message;
use crate::message_id::MessageId;
use crate::producer::{ProducerError, ProducerMessage};

/// Sees every message a producer sends, and how each send ended.
///
/// # Examples
/// ```no_run
/// use pulsar_wire::MessageId;
/// use pulsar_wire::interceptor::ProducerInterceptor;
/// use pulsar_wire::producer::{ProducerError, ProducerMessage};
///
/// #[derive(Debug)]
/// struct Stamp;
///
/// impl ProducerInterceptor for Stamp {
///     fn before_send(&self, _topic: &str, message: ProducerMessage) -> ProducerMessage {
///         message.property("app", "billing")
///     }
///     fn on_send_acknowledgement(&self, topic: &str, outcome: Result<MessageId, &ProducerError>) {
///         if let Err(e) = outcome {
///             eprintln!("send to {topic} failed: {e}");
///         }
///     }
/// }
/// # async fn demo(client: pulsar_wire::Client) -> Result<(), pulsar_wire::Error> {
/// let producer = client.producer("orders").interceptor(Stamp).create().await?;
/// # Ok(()) }
/// ```
pub trait ProducerInterceptor: fmt::Debug + Send + Sync + 'static {
    /// Called by [`Producer::send`](crate::producer::Producer::send), in
    /// the caller's task, before the message is queued; returns the message
    /// to send (changed or not). `topic` is the producer's topic.
    fn before_send(&self, topic: &str, message: ProducerMessage) -> ProducerMessage {
        let _ = topic;
        message
    }

    /// Called once per message when its send is answered, in the
    /// producer's task, just before its receipt resolves: with the id the
    /// broker stored it under, or with the error that failed it. `topic`
    /// is the topic (the partition) it was sent to.
    fn on_send_acknowledgement(&self, topic: &str, outcome: Result<MessageId, &ProducerError>) {
        let _ = (topic, outcome);
    }
}

/// Sees every message a consumer hands to the application, and the
/// application's answers to them.
pub trait ConsumerInterceptor: fmt::Debug + Send + Sync + 'static {
    /// Called just before `message` is handed to the application
    /// (`receive`, the stream, `run`), in that call or in the consumer's
    /// task. A message this consumer
    /// cannot decode, handed out as an error, is not seen here.
    fn before_consume(&self, message: &Message) {
        let _ = message;
    }

    /// Called when the application acks `id` of `topic` (a partition's
    /// full name), individually or cumulatively, as the ack is recorded
    /// (before it reaches the broker), in the `ack` call or in the
    /// consumer's task. `id` is the id the application holds
    /// ([`Message::id`]): a chunked message's is its last chunk's, with
    /// its first beside it ([`MessageId::first_chunk`]); so it is in the
    /// calls below.
    fn on_acknowledge(&self, topic: &str, id: MessageId, cumulative: bool) {
        let _ = (topic, id, cumulative);
    }

    /// Called when the application nacks `id` of `topic`, as the nack is
    /// recorded (its redelivery may wait for the nack policy's delay): in
    /// the `nack` call, or in the consumer's task when a transaction
    /// holding the message's ack aborts.
    fn on_negative_acknowledge(&self, topic: &str, id: MessageId) {
        let _ = (topic, id);
    }

    /// Called in the consumer's task when the ack timeout of `ids` of
    /// `topic` expired, as they are asked for again (Java:
    /// `onAckTimeoutSend`).
    fn on_ack_timeout(&self, topic: &str, ids: &[MessageId]) {
        let _ = (topic, ids);
    }
}

impl<T: ProducerInterceptor + ?Sized> ProducerInterceptor for Arc<T> {
    fn before_send(&self, topic: &str, message: ProducerMessage) -> ProducerMessage {
        (**self).before_send(topic, message)
    }

    fn on_send_acknowledgement(&self, topic: &str, outcome: Result<MessageId, &ProducerError>) {
        (**self).on_send_acknowledgement(topic, outcome);
    }
}

impl<T: ConsumerInterceptor + ?Sized> ConsumerInterceptor for Arc<T> {
    fn before_consume(&self, message: &Message) {
        (**self).before_consume(message);
    }

    fn on_acknowledge(&self, topic: &str, id: MessageId, cumulative: bool) {
        (**self).on_acknowledge(topic, id, cumulative);
    }

    fn on_negative_acknowledge(&self, topic: &str, id: MessageId) {
        (**self).on_negative_acknowledge(topic, id);
    }

    fn on_ack_timeout(&self, topic: &str, ids: &[MessageId]) {
        (**self).on_ack_timeout(topic, ids);
    }
}

/// The interceptors of one producer or consumer, in the order added.
/// Cloning shares them; an empty chain holds no allocation.
pub(crate) struct Chain<T: ?Sized>(Option<Arc<[Arc<T>]>>);

impl<T: ?Sized> Chain<T> {
    /// The chain of `list`, in its order.
    pub(crate) fn new(list: Vec<Arc<T>>) -> Self {
        Self((!list.is_empty()).then(|| list.into()))
    }

    /// Whether the chain holds no interceptor.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    /// The interceptors, in order; empty without any.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        self.0.iter().flat_map(|list| list.iter().map(|i| &**i))
    }
}

impl<T: ?Sized> Clone for Chain<T> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<T: ?Sized> Default for Chain<T> {
    fn default() -> Self {
        Self(None)
    }
}

impl<T: ?Sized> fmt::Debug for Chain<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0.as_ref().map_or(0, |l| l.len());
        write!(f, "{n} interceptors")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[derive(Debug)]
    struct Named(&'static str, Arc<Mutex<Vec<&'static str>>>);

    impl ConsumerInterceptor for Named {
        fn on_negative_acknowledge(&self, _topic: &str, _id: MessageId) {
            self.1.lock().unwrap().push(self.0);
        }
    }

    #[test]
    fn a_chain_calls_in_the_order_added_and_an_empty_one_holds_nothing() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let list: Vec<Arc<dyn ConsumerInterceptor>> = vec![
            Arc::new(Named("first", seen.clone())),
            Arc::new(Arc::new(Named("second", seen.clone()))),
        ];
        let chain = Chain::new(list);
        for i in chain.clone().iter() {
            i.on_negative_acknowledge("t", MessageId::new(1, 2));
        }
        assert_eq!(*seen.lock().unwrap(), ["first", "second"]);
        assert_eq!(format!("{chain:?}"), "2 interceptors");
        let empty: Chain<dyn ConsumerInterceptor> = Chain::new(Vec::new());
        assert!(empty.0.is_none() && empty.iter().next().is_none());
    }
}
