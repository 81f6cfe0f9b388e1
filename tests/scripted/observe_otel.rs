//! The `otel` feature: a producer's and a consumer's figures reach an
//! in-memory OpenTelemetry exporter under the Java client's metric names,
//! units and attributes.

use std::collections::BTreeMap;

use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, SdkMeterProvider};
use pulsar_wire::Client;
use pulsar_wire::consumer::SubscriptionType;
use pulsar_wire::proto::base_command::Type;
use pulsar_wire::wire::Checksum;

use super::super::consume::{SERVICE, TOPIC, attach, message};
use super::super::produce::{answer_lookup, producer_success, send_of};
use crate::common::fake_broker::{FakeNetwork, answer, request_id};
use crate::common::guard;

/// One exported data point: its metric's name and unit, its attributes,
/// and its value (a sum's value, a histogram's count).
#[derive(Debug)]
struct Point {
    name: String,
    unit: String,
    attrs: BTreeMap<String, String>,
    value: f64,
}

fn points(exporter: &InMemoryMetricExporter) -> Vec<Point> {
    let mut out = Vec::new();
    for resource in exporter.get_finished_metrics().expect("metrics") {
        for scope in resource.scope_metrics() {
            assert_eq!(scope.scope().name(), "org.apache.pulsar.client");
            for metric in scope.metrics() {
                let mut push = |attrs: &mut dyn Iterator<Item = &opentelemetry::KeyValue>,
                                value| {
                    out.push(Point {
                        name: metric.name().to_owned(),
                        unit: metric.unit().to_owned(),
                        attrs: attrs
                            .map(|kv| (kv.key.to_string(), kv.value.to_string()))
                            .collect(),
                        value,
                    });
                };
                match metric.data() {
                    AggregatedMetrics::U64(MetricData::Sum(sum)) => {
                        for p in sum.data_points() {
                            push(&mut p.attributes(), p.value() as f64);
                        }
                    }
                    AggregatedMetrics::I64(MetricData::Sum(sum)) => {
                        for p in sum.data_points() {
                            push(&mut p.attributes(), p.value() as f64);
                        }
                    }
                    AggregatedMetrics::F64(MetricData::Histogram(h)) => {
                        for p in h.data_points() {
                            push(&mut p.attributes(), p.count() as f64);
                        }
                    }
                    other => panic!("unexpected {}: {other:?}", metric.name()),
                }
            }
        }
    }
    out
}

/// The value of `name` at the data point whose attributes include `with`.
fn value(points: &[Point], name: &str, unit: &str, with: &[(&str, &str)]) -> f64 {
    let found: Vec<&Point> = points
        .iter()
        .filter(|p| p.name == name)
        .filter(|p| {
            with.iter()
                .all(|(k, v)| p.attrs.get(*k).map(String::as_str) == Some(*v))
        })
        .collect();
    assert_eq!(found.len(), 1, "{name} {with:?} in {points:#?}");
    assert_eq!(found[0].unit, unit, "{name}");
    found[0].value
}

#[tokio::test(start_paused = true)]
async fn producer_and_consumer_metrics_carry_the_java_clients_names() {
    let exporter = InMemoryMetricExporter::default();
    let provider = SdkMeterProvider::builder()
        .with_periodic_exporter(exporter.clone())
        .build();
    let net = FakeNetwork::new();
    guard("otel", async {
        let mut svc = net.listen(SERVICE);
        let build = Client::builder()
            .service_url(format!("pulsar://{SERVICE}"))
            .connector(net.clone())
            .meter_provider(&provider)
            .build();
        let accept = async {
            let mut broker = svc.accept().await;
            broker.handshake().await;
            broker
        };
        let (client, mut broker) = tokio::join!(build, accept);
        let client = client.expect("client");

        let create = client.producer(TOPIC).batching(false).create();
        let script = async {
            let meta = broker.expect(Type::PartitionedMetadata).await;
            broker.send(answer::partitions(request_id(&meta), 0)).await;
            answer_lookup(&mut broker).await;
            let create = broker.expect(Type::Producer).await;
            broker
                .send(producer_success(request_id(&create), "p-1", -1))
                .await;
        };
        let (producer, ()) = tokio::join!(create, script);
        let producer = producer.expect("producer");
        let receipt = producer.send("hello").await.expect("queued");
        let (pid, seq) = send_of(&broker.expect(Type::Send).await);
        broker.send(answer::receipt(pid, seq)).await;
        receipt.await.expect("stored");

        let subscribe = client
            .consumer(TOPIC, "sub")
            .subscription_type(SubscriptionType::Shared)
            .subscribe();
        let script = async {
            let meta = broker.expect(Type::PartitionedMetadata).await;
            broker.send(answer::partitions(request_id(&meta), 0)).await;
            attach(&mut broker).await
        };
        let (consumer, cid) = tokio::join!(subscribe, script);
        let mut consumer = consumer.expect("consumer");
        broker
            .send_frame(message(cid, 1, "one", Checksum::Valid))
            .await;
        broker
            .send_frame(message(cid, 2, "two!", Checksum::Valid))
            .await;
        let one = consumer.receive().await.expect("one");
        let two = consumer.receive().await.expect("two");
        consumer.ack(&one).await.expect("ack");
        consumer.nack(&two).expect("nack");
        broker.expect(Type::Ack).await;
        broker.expect(Type::RedeliverUnacknowledgedMessages).await;
    })
    .await;

    provider.force_flush().expect("flush");
    let p = points(&exporter);
    let topic = [
        ("pulsar.topic", TOPIC),
        ("pulsar.namespace", "public/default"),
        ("pulsar.tenant", "public"),
    ];
    let producer = |name, unit, more: &[(&str, &str)]| {
        let with: Vec<_> = topic.iter().chain(more).copied().collect();
        value(&p, name, unit, &with)
    };
    assert_eq!(
        producer("pulsar.client.producer.opened", "{session}", &[]),
        1.0
    );
    assert_eq!(
        producer("pulsar.client.producer.message.send.size", "By", &[]),
        5.0
    );
    let duration = "pulsar.client.producer.message.send.duration";
    assert_eq!(producer(duration, "s", &[("success", "true")]), 1.0);
    let pending = "pulsar.client.producer.message.pending.count";
    assert_eq!(producer(pending, "{message}", &[]), 0.0);
    assert_eq!(
        producer("pulsar.client.producer.message.pending.size", "By", &[]),
        0.0
    );

    let sub = [("pulsar.subscription", "sub")];
    let consumer = |name, unit| {
        let with: Vec<_> = topic.iter().chain(&sub).copied().collect();
        value(&p, name, unit, &with)
    };
    assert_eq!(consumer("pulsar.client.consumer.opened", "{session}"), 1.0);
    let received = "pulsar.client.consumer.message.received.count";
    assert_eq!(consumer(received, "{message}"), 2.0);
    assert_eq!(
        consumer("pulsar.client.consumer.message.received.size", "By"),
        7.0
    );
    assert_eq!(
        consumer("pulsar.client.consumer.message.ack", "{message}"),
        1.0
    );
    assert_eq!(
        consumer("pulsar.client.consumer.message.nack", "{message}"),
        1.0
    );
    provider.shutdown().expect("shutdown");
}
