//! Statistics of producers and consumers, read from their handles
//! ([`Producer::stats`](crate::producer::Producer::stats),
//! [`Consumer::stats`](crate::Consumer::stats)), over their whole life and
//! over the last stats interval (the client's
//! [`stats_interval`](crate::ClientBuilder::stats_interval), 60 s by
//! default, as the Java client's `statsInterval`).
//!
//! With the cargo feature `otel`, the same events also go to OpenTelemetry
//! metrics under the Java client's names (`pulsar.client.*`), once a meter
//! provider is set with `ClientBuilder::meter_provider` (with that feature).
//!
//! # Examples
//! ```no_run
//! # async fn demo(producer: pulsar_wire::producer::Producer) -> Result<(), pulsar_wire::Error> {
//! producer.send("hello").await?.await?;
//! let stats = producer.stats();
//! println!(
//!     "{} sent, p99 {:?}, {} pending",
//!     stats.total.messages_sent, stats.send_latency.p99, stats.pending_messages
//! );
//! if let Some(last) = stats.interval {
//!     println!("{:.0} msg/s over the last {:?}", last.messages_per_second(), last.elapsed);
//! }
//! # Ok(()) }
//! ```

mod consumer;
mod interval;
mod latency;
#[cfg(feature = "otel")]
mod otel;
mod producer;

use std::sync::Arc;
use std::time::Duration;

pub use consumer::{ConsumerCounts, ConsumerInterval, ConsumerStats};
pub use latency::LatencyPercentiles;
pub use producer::{ProducerCounts, ProducerInterval, ProducerStats};

pub(crate) use consumer::ConsumerRecorder;
pub(crate) use producer::ProducerRecorder;

use crate::client::{Client, ClientBuilder};
use crate::clock;

/// The default stats interval, as the Java client's `statsInterval`.
pub const DEFAULT_STATS_INTERVAL: Duration = Duration::from_secs(60);

/// What a client's producers and consumers record beyond their counters.
#[derive(Debug, Clone)]
pub(crate) struct StatsSettings {
    interval: Duration,
    #[cfg(feature = "otel")]
    meter: Option<opentelemetry::metrics::Meter>,
}

impl Default for StatsSettings {
    fn default() -> Self {
        Self {
            interval: DEFAULT_STATS_INTERVAL,
            #[cfg(feature = "otel")]
            meter: None,
        }
    }
}

impl ClientBuilder {
    /// How long a stats interval lasts: the `interval` figures of
    /// [`ProducerStats`] and [`ConsumerStats`] (and their rates) cover the
    /// last complete one. Default [`DEFAULT_STATS_INTERVAL`] (60 s).
    ///
    /// No timer runs: an interval closes at the first `stats()` call once
    /// it has lasted this long, and its rates divide by the time it really
    /// lasted. `Duration::ZERO` makes every call close one, so `interval`
    /// is what happened since the previous call.
    pub fn stats_interval(mut self, interval: Duration) -> Self {
        self.stats.interval = interval;
        self
    }

    /// Exports every producer's and consumer's figures as OpenTelemetry
    /// metrics through `provider`, under the Java client's names and
    /// attributes (meter `org.apache.pulsar.client`; the instruments are
    /// listed in the repository's `docs/observability.md`). Off by default.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(provider: opentelemetry_sdk::metrics::SdkMeterProvider) -> Result<(), pulsar_wire::Error> {
    /// let client = pulsar_wire::Client::builder()
    ///     .service_url("pulsar://127.0.0.1:6650")
    ///     .meter_provider(&provider)
    ///     .build()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "otel")]
    pub fn meter_provider(mut self, provider: &impl opentelemetry::metrics::MeterProvider) -> Self {
        let scope = opentelemetry::InstrumentationScope::builder(otel::METER_NAME)
            .with_version(env!("CARGO_PKG_VERSION"))
            .build();
        self.stats.meter = Some(provider.meter_with_scope(scope));
        self
    }
}

impl ProducerRecorder {
    /// The recorder of a producer of `topic` made by `client`.
    pub(crate) fn for_producer(client: &Client, _topic: &str) -> Arc<Self> {
        let settings = client.stats_settings();
        #[allow(unused_mut)]
        let mut recorder = Self::new(settings.interval, clock::now());
        #[cfg(feature = "otel")]
        if let Some(meter) = &settings.meter {
            recorder.otel = Some(otel::ProducerInstruments::new(meter, _topic));
        }
        Arc::new(recorder)
    }
}

impl ConsumerRecorder {
    /// The recorder of a consumer of `topic` (its first) on `subscription`
    /// made by `client`.
    pub(crate) fn for_consumer(client: &Client, _topic: &str, _subscription: &str) -> Arc<Self> {
        let settings = client.stats_settings();
        #[allow(unused_mut)]
        let mut recorder = Self::new(settings.interval, clock::now());
        #[cfg(feature = "otel")]
        if let Some(meter) = &settings.meter {
            recorder.otel = Some(otel::ConsumerInstruments::new(meter, _topic, _subscription));
        }
        Arc::new(recorder)
    }
}
