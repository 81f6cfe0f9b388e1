//! Retry letters: [`Consumer::reconsume_later`] publishes a message to the
//! retry-letter topic, delivered again after a delay, and acks the
//! original. See [`ConsumerBuilder::enable_retry`](crate::consumer::ConsumerBuilder::enable_retry).

use std::time::Duration;

use crate::consumer::Consumer;
use crate::consumer::error::ConsumerError;
use crate::consumer::message::Message;

impl Consumer {
    /// Gets `msg` again after `delay`, through the retry-letter topic, and
    /// acks the original.
    ///
    /// The copy (same payload, key, ordering key, event time, properties)
    /// is published to the retry topic with `deliver_after(delay)` and the
    /// properties `REAL_TOPIC` and `ORIGIN_MESSAGE_ID` (those of the first
    /// hop, when the message went round before), `RECONSUMETIMES` (the
    /// previous value plus 1, starting at 1) and `DELAY_TIME` (ms). When `RECONSUMETIMES`
    /// would exceed the dead-letter policy's `max_redeliver_count`, the copy
    /// goes to the dead-letter topic instead. The original is acked only
    /// once the broker confirmed the copy.
    ///
    /// The broker must honour delayed delivery for the delay to hold:
    /// Apache Pulsar does (Shared and Key_Shared subscriptions);
    /// pulsar-lite 0.2.0 delivers the copy at once.
    ///
    /// # Errors
    /// [`ConsumerError::RetryNotEnabled`] without
    /// [`enable_retry`](crate::consumer::ConsumerBuilder::enable_retry),
    /// [`ConsumerError::ForeignMessage`] for a message of another consumer
    /// (both before anything is sent), [`ConsumerError::Letter`] if the
    /// publish failed (the original is not acked: nack it or let it time
    /// out), and the errors of [`ack`](Self::ack).
    ///
    /// # Examples
    /// ```no_run
    /// use std::time::Duration;
    /// # async fn demo(mut consumer: pulsar_wire::Consumer) -> Result<(), pulsar_wire::Error> {
    /// let msg = consumer.receive().await?;
    /// consumer.reconsume_later(&msg, Duration::from_secs(30)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn reconsume_later(
        &self,
        msg: &Message,
        delay: Duration,
    ) -> Result<(), ConsumerError> {
        self.reconsume_later_with_properties(msg, delay, std::iter::empty())
            .await
    }

    /// [`reconsume_later`](Self::reconsume_later), adding `properties` to
    /// the copy (a property of the message with the same name is replaced;
    /// they travel along on later hops).
    ///
    /// # Errors
    /// As [`reconsume_later`](Self::reconsume_later).
    ///
    /// # Examples
    /// ```no_run
    /// use std::time::Duration;
    /// # async fn demo(mut consumer: pulsar_wire::Consumer) -> Result<(), pulsar_wire::Error> {
    /// let msg = consumer.receive().await?;
    /// let why = [("reason".to_owned(), "inventory locked".to_owned())];
    /// consumer
    ///     .reconsume_later_with_properties(&msg, Duration::from_secs(5), why)
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn reconsume_later_with_properties(
        &self,
        msg: &Message,
        delay: Duration,
        properties: impl IntoIterator<Item = (String, String)>,
    ) -> Result<(), ConsumerError> {
        let custom: Vec<(String, String)> = properties.into_iter().collect();
        let letters = self
            .letters
            .as_ref()
            .filter(|l| l.topics().retry_topic().is_some())
            .ok_or(ConsumerError::RetryNotEnabled)?;
        if !self.topics.borrow().knows(msg.topic()) {
            return Err(ConsumerError::ForeignMessage {
                topic: msg.topic().to_owned(),
            });
        }
        letters.reconsume(msg, delay, custom).await?;
        self.ack(msg).await
    }
}
