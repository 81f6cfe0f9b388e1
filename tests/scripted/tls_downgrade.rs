//! TLS never downgrades: a broker that closes a TLS client's producer and
//! hints a plaintext broker (`pulsar://` in `assigned_broker_service_url_tls`)
//! is not followed. The client looks the topic up again over TLS; no
//! plaintext connection is opened, so no CONNECT (and no token) travels in
//! the clear. Scripted brokers behind a TLS acceptor, paused clock.

use std::sync::Arc;

use pulsar_wire::Client;
use pulsar_wire::auth::TokenAuthentication;
use pulsar_wire::proto::base_command::Type;
use pulsar_wire::proto::command_lookup_topic_response::LookupType;
use pulsar_wire::proto::{self, BaseCommand};

use crate::common::fake_broker::{FakeBroker, FakeNetwork, answer, request_id};
use crate::common::tls::{Ca, server_config};
use crate::common::{guard, init_tracing};

const SERVICE: &str = "svc:6651";
const PLAIN: &str = "plain:6650";
const TOKEN: &str = "secret-token";

/// Answers a LOOKUP naming the TLS service itself.
async fn answer_lookup_tls(broker: &mut FakeBroker) {
    let lookup = broker.expect(Type::Lookup).await;
    let mut here = answer::lookup(
        request_id(&lookup),
        LookupType::Connect,
        &format!("pulsar://{PLAIN}"),
        true,
    );
    if let Some(body) = here.lookup_topic_response.as_mut() {
        body.broker_service_url_tls = Some(format!("pulsar+ssl://{SERVICE}"));
    }
    broker.send(here).await;
}

/// Answers PRODUCER; returns the producer id.
async fn answer_producer(broker: &mut FakeBroker) -> u64 {
    let create = broker.expect(Type::Producer).await;
    let body = create.command.producer.as_ref().expect("PRODUCER");
    let success = BaseCommand {
        r#type: Type::ProducerSuccess as i32,
        producer_success: Some(Box::new(proto::CommandProducerSuccess {
            request_id: body.request_id,
            producer_name: "p-1".into(),
            ..proto::CommandProducerSuccess::default()
        })),
        ..BaseCommand::default()
    };
    let id = body.producer_id;
    broker.send(success).await;
    id
}

#[tokio::test(start_paused = true)]
async fn a_plaintext_hint_to_a_tls_client_is_ignored_for_a_lookup() {
    guard("no downgrade", async {
        init_tracing();
        let ca = Ca::new("scripted CA");
        let tls = server_config(&ca.issue(&["svc"]), None);
        let net = FakeNetwork::new();
        let mut svc = net.listen(SERVICE);
        let mut plain = net.listen(PLAIN);
        let client = Client::builder()
            .service_url(format!("pulsar+ssl://{SERVICE}"))
            .connector(net.clone())
            .tls_trust_certs_pem(ca.pem())
            .authentication(TokenAuthentication::from_token(TOKEN))
            .build();
        let accept = async {
            let mut broker = svc.accept_tls(Arc::clone(&tls)).await;
            broker.handshake().await;
            broker
        };
        let (client, mut broker) = tokio::join!(client, accept);
        let client = client.expect("client");
        let create = client.producer("orders").create();
        let script = async {
            let meta = broker.expect(Type::PartitionedMetadata).await;
            broker.send(answer::partitions(request_id(&meta), 0)).await;
            answer_lookup_tls(&mut broker).await;
            answer_producer(&mut broker).await
        };
        let (producer, id) = tokio::join!(create, script);
        let _producer = producer.expect("producer");

        let hint = format!("pulsar://{PLAIN}");
        broker
            .send(BaseCommand {
                r#type: Type::CloseProducer as i32,
                close_producer: Some(Box::new(proto::CommandCloseProducer {
                    producer_id: id,
                    request_id: 0,
                    assigned_broker_service_url: Some(hint.clone()),
                    assigned_broker_service_url_tls: Some(hint),
                })),
                ..BaseCommand::default()
            })
            .await;
        tokio::select! {
            mut leaked = plain.accept() => {
                let connect = leaked.expect(Type::Connect).await;
                panic!(
                    "a plaintext connection was opened; its CONNECT carried {:?}",
                    connect.command.connect.and_then(|c| c.auth_data)
                );
            }
            () = async {
                answer_lookup_tls(&mut broker).await;
                answer_producer(&mut broker).await;
            } => {}
        }
        assert_eq!(net.connects(PLAIN), 0, "no plaintext socket at all");
        assert_eq!(
            net.connects(SERVICE),
            1,
            "the one TLS connection served both"
        );
    })
    .await;
}
