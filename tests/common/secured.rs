//! The Apache Pulsar standalone with token authentication and
//! authorization on that `scripts/apache-pulsar-auth` starts: its URLs, its
//! secret key (tests mint their own tokens with it) and the namespace where
//! role `app` may produce and consume and role `reader` may consume.
//! Tests that need it print `SKIPPED` and return when it is not running.

use std::io::Write as _;
use std::path::PathBuf;

use super::jwt;

/// The role granted produce and consume on [`SecuredBroker::namespace`].
pub const APP_ROLE: &str = "app";
/// The role granted only consume there.
pub const READER_ROLE: &str = "reader";
/// The superuser role.
pub const ADMIN_ROLE: &str = "admin";

/// The running auth-enabled broker.
#[derive(Debug, Clone)]
pub struct SecuredBroker {
    /// `pulsar://127.0.0.1:PORT`.
    pub service_url: String,
    /// `http://127.0.0.1:PORT`.
    pub admin_url: String,
    /// `tenant/namespace` where the app roles have permissions.
    pub namespace: String,
    key_file: PathBuf,
}

impl SecuredBroker {
    /// The broker from `PULSAR_AUTH_*`, or `None` after printing why the
    /// calling test is skipped.
    pub fn get() -> Option<Self> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        match (
            var("PULSAR_AUTH_SERVICE_URL"),
            var("PULSAR_AUTH_ADMIN_URL"),
            var("PULSAR_AUTH_SECRET_KEY_FILE"),
            var("PULSAR_AUTH_NAMESPACE"),
        ) {
            (Some(service_url), Some(admin_url), Some(key), Some(namespace)) => Some(Self {
                service_url,
                admin_url,
                namespace,
                key_file: key.into(),
            }),
            _ => {
                let test = std::thread::current().name().unwrap_or("test").to_owned();
                let _ = writeln!(
                    std::io::stderr(),
                    "SKIPPED {test}: needs an Apache Pulsar with authentication on \
                     (scripts/apache-pulsar-auth run -- cargo test ...)"
                );
                None
            }
        }
    }

    /// The broker's secret key.
    pub fn key(&self) -> Vec<u8> {
        std::fs::read(&self.key_file).expect("read the broker's secret key")
    }

    /// A token for `role` that never expires.
    pub fn token(&self, role: &str) -> String {
        jwt::mint(&self.key(), role, None)
    }

    /// A token for `role` that expires `secs` seconds from now (negative:
    /// expired that long ago).
    pub fn token_expiring_in(&self, role: &str, secs: i64) -> String {
        let exp = jwt::unix_now().saturating_add_signed(secs);
        jwt::mint(&self.key(), role, Some(exp))
    }

    /// A topic name nobody else uses, in the namespace of the app roles.
    pub fn topic(&self, prefix: &str) -> String {
        super::unique_topic(prefix).replace("public/default", &self.namespace)
    }
}
