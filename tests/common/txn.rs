//! The Apache Pulsar standalone with its transaction coordinator on that
//! `scripts/apache-pulsar-txn` starts. Tests that need it print `SKIPPED`
//! and return when it is not running.

use std::io::Write as _;

/// The running transaction-enabled broker.
#[derive(Debug, Clone)]
pub struct TxnBroker {
    /// `pulsar://127.0.0.1:PORT`.
    pub service_url: String,
    /// `http://127.0.0.1:PORT`.
    pub admin_url: String,
}

impl TxnBroker {
    /// The broker from `PULSAR_TXN_*`, or `None` after printing why the
    /// calling test is skipped.
    pub fn get() -> Option<Self> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        match (var("PULSAR_TXN_SERVICE_URL"), var("PULSAR_TXN_ADMIN_URL")) {
            (Some(service_url), Some(admin_url)) => Some(Self {
                service_url,
                admin_url,
            }),
            _ => {
                let test = std::thread::current().name().unwrap_or("test").to_owned();
                let _ = writeln!(
                    std::io::stderr(),
                    "SKIPPED {test}: needs an Apache Pulsar with its transaction coordinator on \
                     (scripts/apache-pulsar-txn run -- cargo test ...)"
                );
                None
            }
        }
    }

    /// A client with transactions enabled.
    pub async fn client(&self) -> pulsar_wire::Client {
        super::init_tracing();
        pulsar_wire::Client::builder()
            .service_url(&self.service_url)
            .enable_transaction(true)
            .build()
            .await
            .expect("client")
    }
}
