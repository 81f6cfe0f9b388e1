//! TLS for `pulsar+ssl://` (cargo feature `tls`): rustls with the `ring`
//! provider, so no OpenSSL is needed on the machine.
//!
//! Trust comes from a CA given as a file or PEM bytes, or else from the
//! operating system's store (`rustls-native-certs`: the roots the machine's
//! administrators manage, corporate CAs included, as the Java and C++
//! clients use). Hostnames are verified unless
//! [`ClientBuilder::danger_accept_invalid_certs`](super::ClientBuilder::danger_accept_invalid_certs)
//! says otherwise, which logs one warning when the client is built.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

use super::{BrokerAddress, BrokerStream, ClientError, TlsConfigProblem};
use crate::connection::{ConnectionError, TlsProblem};

/// PEM data: a file (read when the client is built) or bytes.
#[derive(Clone)]
pub(crate) enum Pem {
    File(PathBuf),
    Bytes(Vec<u8>),
}

impl fmt::Debug for Pem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::File(path) => f.debug_tuple("File").field(path).finish(),
            Self::Bytes(b) => write!(f, "Bytes(<{} bytes>)", b.len()),
        }
    }
}

/// The TLS settings of a [`ClientBuilder`](super::ClientBuilder).
#[derive(Debug, Clone, Default)]
pub(crate) struct TlsOptions {
    pub(crate) trust: Option<Pem>,
    pub(crate) client_auth: Option<(Pem, Pem)>,
    pub(crate) danger_accept_invalid_certs: bool,
}

fn problem(problem: TlsConfigProblem) -> ClientError {
    ClientError::TlsConfig { problem }
}

fn certificates(
    what: &'static str,
    pem: &Pem,
) -> Result<Vec<CertificateDer<'static>>, ClientError> {
    let parsed: Result<Vec<_>, _> = match pem {
        Pem::File(path) => CertificateDer::pem_file_iter(path)
            .and_then(Iterator::collect)
            .map_err(|e| (Some(path.clone()), e)),
        Pem::Bytes(bytes) => CertificateDer::pem_slice_iter(bytes)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| (None, e)),
    };
    let certs = parsed.map_err(|(path, e)| match path {
        Some(path) => problem(TlsConfigProblem::File {
            what,
            path,
            reason: e.to_string(),
        }),
        None => problem(TlsConfigProblem::Rejected {
            what,
            reason: e.to_string(),
        }),
    })?;
    if certs.is_empty() {
        return Err(problem(TlsConfigProblem::Empty {
            what,
            expected: "certificate",
        }));
    }
    Ok(certs)
}

fn private_key(pem: &Pem) -> Result<PrivateKeyDer<'static>, ClientError> {
    const WHAT: &str = "client key";
    let key = match pem {
        Pem::File(path) => PrivateKeyDer::from_pem_file(path),
        Pem::Bytes(bytes) => PrivateKeyDer::from_pem_slice(bytes),
    };
    // The PEM error is not shown: it could quote the key file.
    key.map_err(|e| match (pem, e) {
        (Pem::File(path), rustls::pki_types::pem::Error::Io(io)) => {
            problem(TlsConfigProblem::File {
                what: WHAT,
                path: path.clone(),
                reason: io.to_string(),
            })
        }
        _ => problem(TlsConfigProblem::Empty {
            what: WHAT,
            expected: "private key",
        }),
    })
}

fn roots(trust: Option<&Pem>) -> Result<RootCertStore, ClientError> {
    let mut roots = RootCertStore::empty();
    match trust {
        Some(pem) => {
            for cert in certificates("CA file", pem)? {
                roots.add(cert).map_err(|e| {
                    problem(TlsConfigProblem::Rejected {
                        what: "CA file",
                        reason: e.to_string(),
                    })
                })?;
            }
        }
        None => {
            let native = rustls_native_certs::load_native_certs();
            let (added, _ignored) = roots.add_parsable_certificates(native.certs);
            if added == 0 {
                return Err(problem(TlsConfigProblem::NoSystemRoots));
            }
        }
    }
    Ok(roots)
}

impl TlsOptions {
    /// Reads the files and makes the rustls configuration.
    pub(crate) fn build(&self) -> Result<Tls, ClientError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let rejected = |what| {
            move |e: rustls::Error| {
                problem(TlsConfigProblem::Rejected {
                    what,
                    reason: e.to_string(),
                })
            }
        };
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(rejected("protocol versions"))?;
        let builder = if self.danger_accept_invalid_certs {
            tracing::warn!(
                "TLS certificate and hostname verification is OFF (danger_accept_invalid_certs): \
                 anyone on the network path can impersonate the broker"
            );
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AcceptAnyCert(provider)))
        } else {
            builder.with_root_certificates(roots(self.trust.as_ref())?)
        };
        let config = match &self.client_auth {
            Some((cert, key)) => builder
                .with_client_auth_cert(certificates("client certificate", cert)?, private_key(key)?)
                .map_err(rejected("client certificate and key"))?,
            None => builder.with_no_client_auth(),
        };
        Ok(Tls {
            connector: tokio_rustls::TlsConnector::from(Arc::new(config)),
        })
    }
}

/// A ready TLS configuration: wraps broker streams in TLS.
#[derive(Clone)]
pub(crate) struct Tls {
    connector: tokio_rustls::TlsConnector,
}

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tls").finish_non_exhaustive()
    }
}

impl Tls {
    /// Runs the TLS handshake over `io`, verifying the certificate against
    /// `address`'s host (a name or an IP address).
    pub(crate) async fn handshake(
        &self,
        address: &BrokerAddress,
        io: Box<dyn BrokerStream>,
    ) -> Result<Box<dyn BrokerStream>, ConnectionError> {
        let name =
            ServerName::try_from(address.host().to_owned()).map_err(|e| ConnectionError::Tls {
                problem: TlsProblem::InvalidServerName,
                source: Arc::new(std::io::Error::new(std::io::ErrorKind::InvalidInput, e)),
            })?;
        match self.connector.connect(name, io).await {
            Ok(stream) => Ok(Box::new(stream)),
            Err(e) => Err(match ConnectionError::from(e) {
                ConnectionError::Io(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                    ConnectionError::Tls {
                        problem: TlsProblem::ClosedDuringHandshake,
                        source: e,
                    }
                }
                other => other,
            }),
        }
    }
}

/// Accepts any certificate for any name, checking only the handshake signatures.
#[derive(Debug)]
struct AcceptAnyCert(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAnyCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unusable_settings_are_typed_errors_naming_the_file() {
        let missing = TlsOptions {
            trust: Some(Pem::File("/nonexistent/ca.pem".into())),
            ..TlsOptions::default()
        };
        assert!(matches!(
            missing.build(),
            Err(ClientError::TlsConfig {
                problem: TlsConfigProblem::File {
                    what: "CA file",
                    ..
                }
            })
        ));
        let empty = TlsOptions {
            trust: Some(Pem::Bytes(b"not pem".to_vec())),
            ..TlsOptions::default()
        };
        assert!(matches!(
            empty.build(),
            Err(ClientError::TlsConfig {
                problem: TlsConfigProblem::Empty { .. }
            })
        ));
        let key = Pem::Bytes(
            b"-----BEGIN PRIVATE KEY-----\nc2VjcmV0\n-----END PRIVATE KEY-----\n".to_vec(),
        );
        assert!(
            !format!(
                "{:?}",
                TlsOptions {
                    client_auth: Some((key.clone(), key)),
                    ..TlsOptions::default()
                }
            )
            .contains("c2VjcmV0")
        );
    }
}
