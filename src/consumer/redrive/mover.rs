//! The publishing half of a redrive: publishes copies, at most a window
//! in flight, and acks each dead-letter copy once its publish is confirmed.

use std::collections::HashMap;

use futures::StreamExt;
use futures::stream::FuturesUnordered;

use super::{RedriveError, Redriven};
use crate::client::Client;
use crate::consumer::Consumer;
use crate::consumer::letters::copy::copy_of;
use crate::consumer::message::Message;
use crate::message_id::MessageId;
use crate::producer::{Producer, ProducerError};

/// Republishes in flight at once.
const WINDOW: usize = 64;

type Confirmed = (Message, Redriven, Result<MessageId, ProducerError>);

/// Publishes in flight, and what was moved.
pub(super) struct Mover {
    /// One producer per target topic.
    pub(super) producers: HashMap<String, Producer>,
    in_flight: FuturesUnordered<futures::future::BoxFuture<'static, Confirmed>>,
    /// What was moved, in the order confirmed.
    pub(super) moved: Vec<Redriven>,
}

impl Mover {
    /// Nothing in flight, nothing moved.
    pub(super) fn new() -> Self {
        Self {
            producers: HashMap::new(),
            in_flight: FuturesUnordered::new(),
            moved: Vec::new(),
        }
    }

    /// Publishes `msg` again as `entry` says, keeping at most [`WINDOW`]
    /// publishes in flight.
    pub(super) async fn publish(
        &mut self,
        client: &Client,
        consumer: &Consumer,
        msg: Message,
        entry: Redriven,
    ) -> Result<(), RedriveError> {
        let topic = entry.target.clone();
        let failed = |moved, source| RedriveError::Publish {
            id: entry.id,
            topic: topic.clone(),
            moved,
            source: Box::new(source),
        };
        let producer = match self.producers.get(&topic) {
            Some(producer) => producer.clone(),
            None => {
                let created = client
                    .producer(topic.clone())
                    .batching(false)
                    .create()
                    .await
                    .map_err(|e| failed(self.moved.len(), e))?;
                self.producers.insert(topic.clone(), created.clone());
                created
            }
        };
        let copy = copy_of(&msg, entry.properties.clone());
        let receipt = producer
            .send(copy)
            .await
            .map_err(|e| failed(self.moved.len(), e))?;
        self.in_flight
            .push(Box::pin(async move { (msg, entry, receipt.await) }));
        while self.in_flight.len() >= WINDOW {
            self.confirm_next(consumer).await?;
        }
        Ok(())
    }

    /// Acks the dead-letter copy of the next confirmed publish.
    async fn confirm_next(&mut self, consumer: &Consumer) -> Result<bool, RedriveError> {
        let Some((msg, mut entry, result)) = self.in_flight.next().await else {
            return Ok(false);
        };
        match result {
            Ok(id) => {
                entry.published = Some(id);
                consumer
                    .ack(&msg)
                    .await
                    .map_err(|source| RedriveError::Read {
                        topic: msg.topic().to_owned(),
                        source: Box::new(source),
                    })?;
                self.moved.push(entry);
                Ok(true)
            }
            Err(source) => Err(RedriveError::Publish {
                id: entry.id,
                topic: entry.target,
                moved: self.moved.len(),
                source: Box::new(source),
            }),
        }
    }

    /// Waits for every publish in flight, acking each confirmed one; the
    /// first failure is returned once all are settled.
    pub(super) async fn finish(&mut self, consumer: &Consumer) -> Result<(), RedriveError> {
        let mut first_error = None;
        loop {
            match self.confirm_next(consumer).await {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}
