//! TLS in the tests: certificates made on the fly (rcgen) and a
//! TLS-terminating loopback proxy (tokio-rustls) in front of the real test
//! broker.
//!
//! pulsar-lite speaks no TLS and answers LOOKUP with `pulsar://<its
//! addr>` only. So the proxy forwards the client's bytes untouched and the
//! broker's frame by frame, adding to each LOOKUP_RESPONSE a
//! `broker_service_url_tls` of `pulsar+ssl://<proxy addr>`, as a TLS-enabled
//! Apache Pulsar broker would name itself. A client that follows it stays
//! on the proxy (and TLS); one that followed the plaintext URL would land on
//! the broker's own port, which the tests can tell apart.

use std::net::SocketAddr;
use std::sync::Arc;

use futures::{SinkExt, StreamExt};
use pulsar_wire::codec::PulsarCodec;
use pulsar_wire::wire::Frame;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use rustls::RootCertStore;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::{ServerConfig, WebPkiClientVerifier};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_util::codec::{FramedRead, FramedWrite};

/// A certificate authority that signs certificates for the tests.
pub struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

/// A certificate with its private key, both as PEM.
#[derive(Clone)]
pub struct Identity {
    pub cert_pem: String,
    pub key_pem: String,
    cert_der: CertificateDer<'static>,
    key_der: Vec<u8>,
}

impl Ca {
    pub fn new(name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("ca params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        let key = KeyPair::generate().expect("ca key");
        Self {
            issuer: CertifiedIssuer::self_signed(params, key).expect("ca cert"),
        }
    }

    pub fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// A leaf certificate for `names` (DNS names or IP addresses).
    pub fn issue(&self, names: &[&str]) -> Identity {
        self.issue_with(names, |_| {})
    }

    /// A certificate for `names` that expired in 2020.
    pub fn issue_expired(&self, names: &[&str]) -> Identity {
        self.issue_with(names, |p| {
            p.not_before = rcgen::date_time_ymd(2019, 1, 1);
            p.not_after = rcgen::date_time_ymd(2020, 1, 1);
        })
    }

    fn issue_with(&self, names: &[&str], adjust: impl FnOnce(&mut CertificateParams)) -> Identity {
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let mut params = CertificateParams::new(names).expect("leaf params");
        adjust(&mut params);
        let key = KeyPair::generate().expect("leaf key");
        let cert = params.signed_by(&key, &self.issuer).expect("leaf cert");
        Identity {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            cert_der: cert.der().clone(),
            key_der: key.serialize_der(),
        }
    }

    fn der(&self) -> CertificateDer<'static> {
        self.issuer.der().clone()
    }
}

impl Identity {
    fn key(&self) -> PrivateKeyDer<'static> {
        PrivatePkcs8KeyDer::from(self.key_der.clone()).into()
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A server presenting `identity`; with `client_ca`, clients must present
/// a certificate that CA signed (mutual TLS).
pub fn server_config(identity: &Identity, client_ca: Option<&Ca>) -> Arc<ServerConfig> {
    let builder = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("versions");
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = RootCertStore::empty();
            roots.add(ca.der()).expect("client ca");
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
                .build()
                .expect("client verifier");
            builder.with_client_cert_verifier(verifier)
        }
    };
    Arc::new(
        builder
            .with_single_cert(vec![identity.cert_der.clone()], identity.key())
            .expect("server cert"),
    )
}

/// A TLS-terminating proxy on a free loopback port, forwarding to `backend`.
pub struct TlsProxy {
    addr: SocketAddr,
    accepts: mpsc::UnboundedReceiver<Result<(), String>>,
    task: tokio::task::JoinHandle<()>,
}

impl TlsProxy {
    pub async fn start(config: Arc<ServerConfig>, backend: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let acceptor = tokio_rustls::TlsAcceptor::from(config);
        let (report, accepts) = mpsc::unbounded_channel();
        let task = tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let (acceptor, report) = (acceptor.clone(), report.clone());
                tokio::spawn(async move {
                    match acceptor.accept(socket).await {
                        Ok(tls) => {
                            let _ = report.send(Ok(()));
                            forward(tls, backend, addr).await;
                        }
                        Err(e) => {
                            let _ = report.send(Err(e.to_string()));
                        }
                    }
                });
            }
        });
        Self {
            addr,
            accepts,
            task,
        }
    }

    /// `pulsar+ssl://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("pulsar+ssl://{}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// How the server side of the next TLS handshake ended.
    pub async fn next_accept(&mut self) -> Result<(), String> {
        self.accepts.recv().await.expect("proxy running")
    }
}

impl Drop for TlsProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Client bytes go to the broker as they are; broker frames come back one
/// by one, LOOKUP_RESPONSE gaining the proxy's `pulsar+ssl://` URL.
async fn forward<S>(client: S, backend: SocketAddr, proxy: SocketAddr)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let Ok(broker) = TcpStream::connect(backend).await else {
        return;
    };
    let (mut broker_read, mut broker_write) = broker.into_split();
    let (mut client_read, client_write) = tokio::io::split(client);
    let up = async {
        let _ = tokio::io::copy(&mut client_read, &mut broker_write).await;
        let _ = tokio::io::AsyncWriteExt::shutdown(&mut broker_write).await;
    };
    let down = async {
        let mut frames = FramedRead::new(&mut broker_read, PulsarCodec::default());
        let mut out = FramedWrite::new(client_write, PulsarCodec::default());
        while let Some(Ok(mut frame)) = frames.next().await {
            if let Some(lookup) = frame.command.lookup_topic_response.as_mut() {
                lookup.broker_service_url_tls = Some(format!("pulsar+ssl://{proxy}"));
            }
            if out.send(frame).await.is_err() {
                break;
            }
        }
        let _ = SinkExt::<Frame>::close(&mut out).await;
    };
    tokio::join!(up, down);
}
