//! Connect over TLS with a token, then produce one message.
//!
//! ```sh
//! PULSAR_SERVICE_URL=pulsar+ssl://broker.example.com:6651 \
//! PULSAR_CA_FILE=/etc/pulsar/ca.pem PULSAR_TOKEN_FILE=/var/run/secrets/pulsar-token \
//! cargo run --example tls_token --features tls
//! ```
//! Without `PULSAR_CA_FILE` the system's trusted roots are used. The token
//! file is read again for every connection, so it can be rotated.

use pulsar_wire::Client;
use pulsar_wire::auth::TokenAuthentication;
use pulsar_wire::producer::ProducerMessage;

#[tokio::main]
async fn main() -> Result<(), pulsar_wire::Error> {
    let url = std::env::var("PULSAR_SERVICE_URL").unwrap_or("pulsar+ssl://127.0.0.1:6651".into());
    let token_file =
        std::env::var("PULSAR_TOKEN_FILE").unwrap_or("/var/run/secrets/pulsar-token".into());
    let mut builder = Client::builder()
        .service_url(url)
        .authentication(TokenAuthentication::from_file(token_file));
    if let Ok(ca) = std::env::var("PULSAR_CA_FILE") {
        builder = builder.tls_trust_certs_file(ca);
    }
    let client = builder.build().await?;
    let producer = client
        .producer("persistent://public/default/secured")
        .create()
        .await?;
    let id = producer
        .send(ProducerMessage::new("over TLS"))
        .await?
        .await?;
    println!("stored as {id}");
    producer.close().await?;
    client.close().await;
    Ok(())
}
