//! The command over TLS: a TLS-terminating proxy with certificates made per
//! test in front of the test broker (see `common::tls`). One test per
//! source of TLS settings: `--tls-trust-certs`, `--tls-allow-insecure`,
//! `--tls-cert`/`--tls-key` (mutual TLS), and a client.conf.

use crate::common::broker::TestBroker;
use crate::common::tls::{Ca, TlsProxy, server_config};
use crate::common::{TempDir, unique_topic};
use crate::{Run, run_raw};

const HOST: &str = "127.0.0.1";

/// `pulsar-wire ARGS... produce <topic> -m over-tls`.
async fn produce(args: &[&str]) -> Run {
    let topic = unique_topic("cli-tls");
    let mut all = args.to_vec();
    all.extend_from_slice(&["produce", &topic, "-m", "over-tls"]);
    run_raw(&all).await
}

fn produced(run: &Run) {
    assert_eq!(run.ok_lines().len(), 1, "{run:#?}");
}

#[tokio::test]
async fn trust_certs_flag_and_its_absence() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let ca = Ca::new("cli CA");
    let proxy = TlsProxy::start(server_config(&ca.issue(&[HOST]), None), broker.addr()).await;
    let dir = TempDir::new("cli-tls-ca");
    let ca_file = dir.file("ca.pem", ca.pem());
    let url = proxy.url();

    produced(
        &produce(&[
            "--url",
            &url,
            "--tls-trust-certs",
            ca_file.to_str().expect("path"),
        ])
        .await,
    );

    let refused = produce(&["--url", &url]).await;
    assert_eq!(refused.code, Some(1), "{refused:#?}");
    assert!(refused.stderr.contains("unknown CA"), "{refused:#?}");
}

#[tokio::test]
async fn allow_insecure_flag_accepts_an_untrusted_certificate() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let untrusted = Ca::new("nobody's CA").issue(&["some-other-host"]);
    let proxy = TlsProxy::start(server_config(&untrusted, None), broker.addr()).await;
    produced(&produce(&["--url", &proxy.url(), "--tls-allow-insecure"]).await);
}

#[tokio::test]
async fn client_certificate_flags_for_mutual_tls() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let ca = Ca::new("mtls CA");
    let proxy = TlsProxy::start(server_config(&ca.issue(&[HOST]), Some(&ca)), broker.addr()).await;
    let client = ca.issue(&["client"]);
    let dir = TempDir::new("cli-mtls");
    let (ca_file, cert, key) = (
        dir.file("ca.pem", ca.pem()),
        dir.file("client.pem", &client.cert_pem),
        dir.file("client.key", &client.key_pem),
    );
    let [ca_file, cert, key] =
        [&ca_file, &cert, &key].map(|p| p.to_str().expect("path").to_owned());
    let url = proxy.url();
    let trusted = ["--url", url.as_str(), "--tls-trust-certs", ca_file.as_str()];

    let mut with_cert = trusted.to_vec();
    with_cert.extend_from_slice(&["--tls-cert", &cert, "--tls-key", &key]);
    produced(&produce(&with_cert).await);

    let refused = produce(&trusted).await;
    assert_eq!(
        refused.code,
        Some(1),
        "without a client certificate: {refused:#?}"
    );

    let mut half = trusted.to_vec();
    half.extend_from_slice(&["--tls-cert", &cert]);
    let half = produce(&half).await;
    assert_eq!(half.code, Some(1), "{half:#?}");
    assert!(half.stderr.contains("--tls-key"), "{half:#?}");
}

#[tokio::test]
async fn client_conf_tls_settings() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let ca = Ca::new("conf CA");
    let proxy = TlsProxy::start(server_config(&ca.issue(&[HOST]), None), broker.addr()).await;
    let dir = TempDir::new("cli-tls-conf");
    let ca_file = dir.file("ca.pem", ca.pem());
    let conf = dir.file(
        "client.conf",
        format!(
            "brokerServiceUrl={}\ntlsTrustCertsFilePath={}\ntlsAllowInsecureConnection=false\n",
            proxy.url(),
            ca_file.display()
        ),
    );
    produced(&produce(&["--conf", conf.to_str().expect("path")]).await);

    // The file's CA is not the proxy's: refused, unless the flag allows any.
    let other = dir.file("other.pem", Ca::new("other CA").pem());
    let conf = dir.file(
        "other.conf",
        format!(
            "brokerServiceUrl={}\ntlsTrustCertsFilePath={}\n",
            proxy.url(),
            other.display()
        ),
    );
    let conf = conf.to_str().expect("path");
    let refused = produce(&["--conf", conf]).await;
    assert_eq!(refused.code, Some(1), "{refused:#?}");
    produced(&produce(&["--conf", conf, "--tls-allow-insecure"]).await);
}
