//! The application of a simulation: its producers, its consumers (one
//! task per consumer instance, in the way the workload takes messages) and
//! its reader. Each records in the journal what it saw and did.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::StreamExt;

use crate::client::Client;
use crate::consumer::{
    BatchReceivePolicy, Consumer, ConsumerError, DeadLetterPolicy, Message, NackPolicy, Outcome,
    Reader, RunOptions,
};
use crate::message_id::MessageId;
use crate::producer::{Producer, ProducerMessage};
use crate::testing::TestBroker;

use super::journal::{Journal, payload};
use super::plan::{AckStyle, Api, MAX_MESSAGE_SIZE, Workload, mix};

/// The subscription every consumer of a simulation joins.
pub(crate) const SUBSCRIPTION: &str = "sim";

/// The name consumer `instance` gives the broker: the broker's record of
/// each ACK names who sent it.
pub(crate) fn consumer_name(instance: usize) -> String {
    format!("consumer-{instance}")
}

/// The size of a message that goes in chunks.
const CHUNKED: usize = MAX_MESSAGE_SIZE * 5 / 2;

/// Everything the roles share.
pub(crate) struct Stage {
    pub(crate) seed: u64,
    pub(crate) workload: Workload,
    pub(crate) broker: TestBroker,
    /// The consumers' and the reader's client.
    pub(crate) client: Client,
    /// One client per producer, each with its connection of its own, so
    /// the chunks of one producer's messages interleave with the other's
    /// messages as they do with producers on separate machines.
    pub(crate) producer_clients: Vec<Client>,
    pub(crate) topic: String,
    pub(crate) journal: Mutex<Journal>,
    /// The live consumer instances (index = instance number).
    pub(crate) consumers: Mutex<Vec<Option<Consumer>>>,
    /// Rejoins under way (a consumer closing, then a new one subscribing):
    /// awaited before the clients close, so none meets a closed client.
    pub(crate) rejoins: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// The application's own handler, run in place of the simulation's.
    pub(crate) handler: Option<Handler>,
}

/// An application's handler, as `Consumer::run` calls it.
pub(crate) type Handler =
    Arc<dyn Fn(Message) -> futures::future::BoxFuture<'static, Outcome> + Send + Sync>;

/// What the application does with a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Act {
    Ack,
    Nack,
    /// Neither: the ack timeout asks for it again.
    Leave,
}

impl Stage {
    pub(crate) fn journal(&self) -> MutexGuard<'_, Journal> {
        self.journal.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The consumer instances that are open, by instance number.
    pub(crate) fn live_consumers(&self) -> Vec<(usize, Consumer)> {
        self.consumers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .enumerate()
            .filter_map(|(i, c)| c.clone().map(|c| (i, c)))
            .collect()
    }

    fn roll(&self, name: &str, salt: u64) -> u64 {
        let h = name
            .bytes()
            .fold(salt, |h, b| mix(h ^ u64::from(b)).wrapping_add(h));
        mix(h ^ self.seed)
    }

    /// A message that fails every time (only where a dead-letter topic
    /// takes it in the end).
    fn is_poison(&self, name: &str) -> bool {
        self.workload.dead_letter_after.is_some() && self.roll(name, 1) % 9 == 0
    }

    /// What the application does with `name`: a few are nacked or left
    /// once, poison messages always nacked, the rest acked.
    fn decide(&self, name: &str) -> Act {
        if self.is_poison(name) {
            return Act::Nack;
        }
        if self.journal().times_asked_again(name) > 0 {
            return Act::Ack;
        }
        match self.roll(name, 2) % 8 {
            0 => Act::Nack,
            1 if self.workload.ack_timeout.is_some() => Act::Leave,
            _ => Act::Ack,
        }
    }

    /// Consumer `instance` as the workload sets it up.
    pub(crate) async fn subscribe(&self, instance: usize) -> Result<Consumer, ConsumerError> {
        let w = &self.workload;
        let mut b = self
            .client
            .consumer(&self.topic, SUBSCRIPTION)
            .consumer_name(consumer_name(instance))
            .subscription_type(w.kind)
            .initial_position(crate::consumer::InitialPosition::Earliest)
            .receiver_queue_size(w.receiver_queue)
            .ack_receipts(w.receipts)
            .batch_index_ack(w.batch_index_ack)
            .batch_receive_policy(BatchReceivePolicy {
                max_messages: Some(10),
                max_bytes: None,
                timeout: Some(Duration::from_millis(100)),
            });
        if w.acks == AckStyle::Grouped {
            b = b.ack_group_time(Duration::from_millis(100));
        }
        if let Some(delay) = w.nack_delay {
            b = b.nack_policy(NackPolicy::FixedDelay(delay));
        }
        if let Some(timeout) = w.ack_timeout {
            b = b.ack_timeout(timeout);
        }
        if let Some(n) = w.dead_letter_after {
            b = b.dead_letter_policy(DeadLetterPolicy::after_redeliveries(n));
        }
        b.subscribe().await
    }

    /// Starts consumer instance `instance` on `consumer`.
    pub(crate) fn start_consumer(self: &Arc<Self>, instance: usize, consumer: Consumer) {
        {
            let mut all = self.consumers.lock().unwrap_or_else(|e| e.into_inner());
            if all.len() <= instance {
                all.resize(instance + 1, None);
            }
            all[instance] = Some(consumer.clone());
        }
        let stage = self.clone();
        tokio::spawn(async move { stage.consume(instance, consumer).await });
    }

    async fn consume(self: Arc<Self>, instance: usize, mut consumer: Consumer) {
        let ended = match self.workload.api {
            Api::Receive | Api::Stream => self.take_loop(instance, &mut consumer).await,
            Api::Batch => self.batch_loop(instance, &mut consumer).await,
            Api::Run => self.clone().run_loop(instance, consumer).await,
        };
        if let Err(e) = ended {
            self.journal()
                .violation(format!("consumer {instance} failed to receive: {e}"));
        }
    }

    /// How long a consumer acking cumulatively waits for a message before
    /// it acks the last one it has.
    fn idle(&self) -> Option<Duration> {
        (self.workload.acks == AckStyle::Cumulative).then_some(Duration::from_millis(500))
    }

    /// Acks cumulatively, on each partition, the last message handed out
    /// there (what a consumer acking cumulatively does when idle).
    async fn ack_last(
        &self,
        instance: usize,
        consumer: &Consumer,
        last: &mut BTreeMap<String, Message>,
    ) {
        for (_, msg) in std::mem::take(last) {
            self.ack_cumulative(instance, consumer, &msg).await;
        }
    }

    /// The loop of `receive()` and of the `Stream`: one message at a time.
    async fn take_loop(
        &self,
        instance: usize,
        consumer: &mut Consumer,
    ) -> Result<(), ConsumerError> {
        let mut last = BTreeMap::new();
        loop {
            let next = match self.idle() {
                Some(idle) => match tokio::time::timeout(idle, self.next_message(consumer)).await {
                    Ok(next) => next,
                    Err(_) => {
                        self.ack_last(instance, consumer, &mut last).await;
                        continue;
                    }
                },
                None => self.next_message(consumer).await,
            };
            match next {
                Ok(msg) => {
                    self.handle(instance, consumer, &msg, None).await;
                    last.insert(msg.topic().to_owned(), msg);
                }
                Err(ConsumerError::Closed) => return Ok(()),
                Err(e) => return Err(e),
            }
        }
    }

    /// The next message, the way the workload takes it (the end of the
    /// `Stream` is a close).
    async fn next_message(&self, consumer: &mut Consumer) -> Result<Message, ConsumerError> {
        match self.workload.api {
            Api::Stream => consumer.next().await.unwrap_or(Err(ConsumerError::Closed)),
            _ => consumer.receive().await,
        }
    }

    async fn batch_loop(
        &self,
        instance: usize,
        consumer: &mut Consumer,
    ) -> Result<(), ConsumerError> {
        let mut last = BTreeMap::new();
        loop {
            match consumer.receive_batch().await {
                Ok(batch) => {
                    let received = self.journal().broker_events();
                    let batch = batch.into_vec();
                    if batch.is_empty() && self.workload.acks == AckStyle::Cumulative {
                        self.ack_last(instance, consumer, &mut last).await;
                    }
                    for msg in batch {
                        self.handle(instance, consumer, &msg, Some(received)).await;
                        last.insert(msg.topic().to_owned(), msg);
                    }
                }
                Err(ConsumerError::Closed) => return Ok(()),
                Err(e) => return Err(e),
            }
        }
    }

    async fn run_loop(
        self: Arc<Self>,
        instance: usize,
        consumer: Consumer,
    ) -> Result<(), ConsumerError> {
        let stage = self.clone();
        let handler = move |msg: Message| {
            let stage = stage.clone();
            async move {
                let name = stage.journal().handed_out(instance, &msg);
                let Some(name) = name else {
                    return Ok::<_, std::convert::Infallible>(Outcome::Ack);
                };
                if let Some(handler) = &stage.handler {
                    let outcome = handler(msg).await;
                    let mut journal = stage.journal();
                    match outcome {
                        Outcome::Ack => journal.handler_acked(instance, name),
                        Outcome::Retry | Outcome::RetryLater(_) | Outcome::Leave => {
                            journal.asked_again(&name);
                        }
                    }
                    return Ok(outcome);
                }
                let slow = stage.workload.lease && stage.roll(&name, 3) % 5 == 0;
                if let (true, Some(timeout)) = (slow, stage.workload.ack_timeout) {
                    tokio::time::sleep(timeout * 3 / 2).await;
                }
                Ok(match stage.decide(&name) {
                    Act::Ack => {
                        stage.journal().handler_acked(instance, name);
                        Outcome::Ack
                    }
                    Act::Nack => {
                        stage.journal().asked_again(&name);
                        Outcome::Retry
                    }
                    Act::Leave => {
                        stage.journal().asked_again(&name);
                        Outcome::Leave
                    }
                })
            }
        };
        let mut options = RunOptions::default().concurrency(1 + (self.seed % 3) as usize);
        if self.workload.lease {
            options = options.lease(Duration::from_secs(600));
        }
        consumer.run(handler, options).await
    }

    /// `received`: how many events the broker had recorded when the
    /// application received `msg`, if earlier than now.
    async fn handle(
        &self,
        instance: usize,
        consumer: &Consumer,
        msg: &Message,
        received: Option<usize>,
    ) {
        let name = {
            let mut journal = self.journal();
            match received {
                Some(received) => journal.handed_out_received(instance, msg, received),
                None => journal.handed_out(instance, msg),
            }
        };
        let Some(name) = name else {
            let _ = consumer.ack(msg).await;
            return;
        };
        match self.decide(&name) {
            Act::Ack if self.workload.acks == AckStyle::Cumulative => {
                if self.roll(&name, 4) % 3 == 0 {
                    self.ack_cumulative(instance, consumer, msg).await;
                }
            }
            Act::Ack => {
                let begun = self.journal().ack_attempted(instance, &name);
                if consumer.ack(msg).await.is_ok() {
                    self.journal()
                        .acked(instance, &name, (msg.topic(), msg.id()), begun);
                }
            }
            Act::Nack => {
                self.journal().asked_again(&name);
                let _ = consumer.nack(msg);
            }
            Act::Leave => self.journal().asked_again(&name),
        }
    }

    async fn ack_cumulative(&self, instance: usize, consumer: &Consumer, msg: &Message) {
        let begun = self
            .journal()
            .cumulative_attempted(instance, msg.topic(), msg.id());
        if consumer.ack_cumulative(msg).await.is_ok() {
            self.journal()
                .acked_cumulative(instance, msg.topic(), msg.id(), begun);
        }
    }

    /// Producer `index`: every message of the workload, pipelined; the
    /// confirmed ones go in the journal.
    pub(crate) async fn produce(self: Arc<Self>, index: usize) -> Option<Producer> {
        let w = &self.workload;
        let chunking = index == 0 && w.chunk_every > 0;
        let producer = self.producer_clients[index]
            .producer(&self.topic)
            .batching(w.batching && !chunking)
            .chunking(chunking)
            .compression(w.compression)
            .create()
            .await;
        let producer = match producer {
            Ok(p) => p,
            Err(e) => {
                self.journal()
                    .violation(format!("producer {index} was not created: {e}"));
                return None;
            }
        };
        let mut receipts = Vec::new();
        for seq in 0..w.messages {
            let name = format!("p{index}-{seq}");
            let roll = self.roll(&name, 5);
            let len = if chunking && seq % w.chunk_every == 0 {
                CHUNKED + (roll % 1000) as usize
            } else {
                (roll % 300) as usize
            };
            let key = format!("k{}", roll % w.keys);
            let msg = ProducerMessage::new(payload(&name, len)).key(key);
            match producer.send(msg).await {
                Ok(receipt) => receipts.push((name, receipt)),
                Err(_) => continue,
            }
            if roll % 16 == 0 {
                tokio::task::yield_now().await;
            }
        }
        for (name, receipt) in receipts {
            if let Ok(id) = receipt.await {
                self.journal().confirmed.insert(name, id);
            }
        }
        Some(producer)
    }

    /// Creates the reader, if the workload has one.
    pub(crate) async fn reader(&self) -> Option<Result<Reader, ConsumerError>> {
        if !self.workload.reader {
            return None;
        }
        Some(
            self.client
                .reader(&self.topic)
                .start_message_id(MessageId::EARLIEST)
                .create()
                .await,
        )
    }
}
