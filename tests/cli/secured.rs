//! The command against a broker with token authentication on (the Apache
//! Pulsar of `scripts/apache-pulsar-auth`; skipped without it): one test
//! per source of credentials (`--auth-token`, `--auth-token-file`, a
//! client.conf by `--conf` and by `PULSAR_CLIENT_CONF`), flags winning over
//! the file, and a refusal that says why.

use crate::common::TempDir;
use crate::common::secured::{APP_ROLE, SecuredBroker};
use crate::{Run, run_with_env};

/// `produce` one message with `args` (and `env`) in front, then `consume`
/// it the same way; returns both runs.
async fn produce_then_consume(
    broker: &SecuredBroker,
    args: &[&str],
    env: &[(&str, &str)],
) -> (Run, Run) {
    let topic = broker.topic("cli-secured");
    let with = |tail: &[&str]| {
        let mut all = args.to_vec();
        all.extend_from_slice(tail);
        all.into_iter().map(str::to_owned).collect::<Vec<_>>()
    };
    let produce = with(&["produce", &topic, "-m", "secured hello"]);
    let produce = run_with_env(&produce.iter().map(String::as_str).collect::<Vec<_>>(), env).await;
    let consume = with(&[
        "consume",
        &topic,
        "-s",
        "s",
        "-t",
        "shared",
        "--position",
        "earliest",
        "-n",
        "1",
    ]);
    let consume = run_with_env(&consume.iter().map(String::as_str).collect::<Vec<_>>(), env).await;
    (produce, consume)
}

/// Asserts both runs succeeded and the message came through.
fn assert_round_trip((produce, consume): (Run, Run)) {
    assert_eq!(produce.ok_lines().len(), 1, "{produce:#?}");
    let lines = consume.ok_lines();
    assert_eq!(lines.len(), 1, "{consume:#?}");
    assert_eq!(lines[0]["payload"], "secured hello", "{consume:#?}");
}

#[tokio::test]
async fn auth_token_flag() {
    let Some(broker) = SecuredBroker::get() else {
        return;
    };
    let token = broker.token(APP_ROLE);
    let args = ["--url", &broker.service_url, "--auth-token", &token];
    assert_round_trip(produce_then_consume(&broker, &args, &[]).await);
}

#[tokio::test]
async fn auth_token_file_flag() {
    let Some(broker) = SecuredBroker::get() else {
        return;
    };
    let dir = TempDir::new("cli-token");
    let file = dir.file("token", format!("{}\n", broker.token(APP_ROLE)));
    let file = file.to_str().expect("utf-8 path");
    let args = ["--url", &broker.service_url, "--auth-token-file", file];
    assert_round_trip(produce_then_consume(&broker, &args, &[]).await);
}

/// A client.conf as the Pulsar distribution ships it, filled in.
fn client_conf(broker: &SecuredBroker, auth_params: &str) -> String {
    format!(
        "# Configuration for pulsar-client and pulsar-admin CLI tools\n\
         webServiceUrl={admin}/\n\
         brokerServiceUrl={service}/\n\
         authPlugin=org.apache.pulsar.client.impl.auth.AuthenticationToken\n\
         authParams={auth_params}\n\
         tlsAllowInsecureConnection=false\n\
         tlsEnableHostnameVerification=false\n\
         tlsTrustCertsFilePath=\n",
        admin = broker.admin_url,
        service = broker.service_url,
    )
}

#[tokio::test]
async fn client_conf_by_conf_flag_with_a_token_file() {
    let Some(broker) = SecuredBroker::get() else {
        return;
    };
    let dir = TempDir::new("cli-conf");
    let token = dir.file("token", broker.token(APP_ROLE));
    let params = format!("file://{}", token.display());
    let conf = dir.file("client.conf", client_conf(&broker, &params));
    // No --url: brokerServiceUrl of the file.
    let args = ["--conf", conf.to_str().expect("utf-8 path")];
    assert_round_trip(produce_then_consume(&broker, &args, &[]).await);
}

#[tokio::test]
async fn client_conf_by_environment_with_json_params() {
    let Some(broker) = SecuredBroker::get() else {
        return;
    };
    let dir = TempDir::new("cli-conf-env");
    let params = format!("{{\"token\":\"{}\"}}", broker.token(APP_ROLE));
    let conf = dir.file("client.conf", client_conf(&broker, &params));
    let env = [("PULSAR_CLIENT_CONF", conf.to_str().expect("utf-8 path"))];
    assert_round_trip(produce_then_consume(&broker, &[], &env).await);
}

#[tokio::test]
async fn flags_win_over_the_client_conf() {
    let Some(broker) = SecuredBroker::get() else {
        return;
    };
    let dir = TempDir::new("cli-conf-flags");
    let expired = broker.token_expiring_in(APP_ROLE, -60);
    let conf = dir.file(
        "client.conf",
        client_conf(&broker, &format!("token:{expired}")),
    );
    let conf = conf.to_str().expect("utf-8 path");

    // The file alone: its expired token is refused, and the error says so.
    let (produce, _) = produce_then_consume(&broker, &["--conf", conf], &[]).await;
    assert_eq!(produce.code, Some(1), "{produce:#?}");
    assert!(
        produce.stderr.contains("expired"),
        "the refusal says why: {produce:#?}"
    );
    assert!(
        !produce.stderr.contains(&expired),
        "token in stderr: {produce:#?}"
    );

    // A valid token on the command line wins over the file's.
    let token = broker.token(APP_ROLE);
    let args = ["--conf", conf, "--auth-token", &token];
    assert_round_trip(produce_then_consume(&broker, &args, &[]).await);
}

/// An issuer on loopback TCP signing with the broker's key for role `app`,
/// and a key file for its client.
async fn issuer(
    broker: &SecuredBroker,
    dir: &TempDir,
) -> (crate::common::oauth2_issuer::Issuer, String, String) {
    let issuer = crate::common::oauth2_issuer::Issuer::new(broker.key(), 3600);
    issuer
        .client("cli-client", "cli-secret", APP_ROLE)
        .require_audience("urn:pulsar:cli");
    let url = issuer.serve_tcp().await;
    let key = dir.file(
        "key.json",
        r#"{"type":"client_credentials","client_id":"cli-client","client_secret":"cli-secret"}"#,
    );
    (issuer, url, key.to_str().expect("utf-8 path").to_owned())
}

#[tokio::test]
async fn oauth2_flags() {
    let Some(broker) = SecuredBroker::get() else {
        return;
    };
    let dir = TempDir::new("cli-oauth2");
    let (issuer, url, key) = issuer(&broker, &dir).await;
    let args = [
        "--url",
        &broker.service_url,
        "--oauth2-issuer-url",
        &url,
        "--oauth2-credentials-file",
        &key,
        "--oauth2-audience",
        "urn:pulsar:cli",
        "--oauth2-scope",
        "pulsar",
    ];
    assert_round_trip(produce_then_consume(&broker, &args, &[]).await);
    assert_eq!(issuer.requests(), (2, 2), "each run: discovery and a token");
    assert_eq!(issuer.last_form("scope").as_deref(), Some("pulsar"));
}

#[tokio::test]
async fn oauth2_client_conf_and_a_flag_over_it() {
    let Some(broker) = SecuredBroker::get() else {
        return;
    };
    let dir = TempDir::new("cli-oauth2-conf");
    let (issuer, url, key) = issuer(&broker, &dir).await;
    let conf = format!(
        "brokerServiceUrl={}\n\
         authPlugin=org.apache.pulsar.client.impl.auth.oauth2.AuthenticationOAuth2\n\
         authParams={{\"type\":\"client_credentials\",\"issuerUrl\":\"{url}\",\
         \"privateKey\":\"file://{key}\",\"audience\":\"urn:pulsar:wrong\"}}\n",
        broker.service_url
    );
    let conf = dir.file("client.conf", conf);
    let conf = conf.to_str().expect("utf-8 path");

    // The file's audience is refused by the issuer, with its error code.
    let (produce, _) = produce_then_consume(&broker, &["--conf", conf], &[]).await;
    assert_eq!(produce.code, Some(1), "{produce:#?}");
    assert!(produce.stderr.contains("invalid_request"), "{produce:#?}");
    assert!(!produce.stderr.contains("cli-secret"), "{produce:#?}");

    // The audience flag refines the file's OAuth2 settings.
    let args = ["--conf", conf, "--oauth2-audience", "urn:pulsar:cli"];
    assert_round_trip(produce_then_consume(&broker, &args, &[]).await);
    assert_eq!(
        issuer.last_form("audience").as_deref(),
        Some("urn:pulsar:cli")
    );
}
