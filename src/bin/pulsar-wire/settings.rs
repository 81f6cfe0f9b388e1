//! How the command reaches a secured cluster: authentication and TLS from
//! the command line and from the `client.conf` the official tools read
//! (`--conf FILE`, else `$PULSAR_CLIENT_CONF`). A flag wins over the file,
//! setting by setting.

use std::fmt;
use std::path::{Path, PathBuf};

use pulsar_wire::ClientBuilder;
use pulsar_wire::auth::{OAuth2ClientCredentials, TokenAuthentication};

use crate::client_conf;

/// Security flags, global to every subcommand.
#[derive(Debug, clap::Args)]
pub(crate) struct SecurityArgs {
    /// A client.conf as the official Pulsar tools read it (brokerServiceUrl,
    /// authPlugin, authParams, tlsTrustCertsFilePath,
    /// tlsAllowInsecureConnection). Default: $PULSAR_CLIENT_CONF. Flags win
    /// over the file.
    #[arg(long, global = true, value_name = "FILE")]
    conf: Option<PathBuf>,

    /// Authenticate with this token (method `token`). Visible to other
    /// users in the process list: prefer --auth-token-file.
    #[arg(long, global = true, value_name = "TOKEN", conflicts_with_all = ["auth_token_file", "oauth2_issuer_url", "oauth2_credentials_file"])]
    auth_token: Option<String>,

    /// Authenticate with the token in this file, read again for every
    /// connection and every refresh the broker asks for.
    #[arg(long, global = true, value_name = "FILE", conflicts_with_all = ["oauth2_issuer_url", "oauth2_credentials_file"])]
    auth_token_file: Option<PathBuf>,

    #[command(flatten)]
    oauth2: OAuth2Args,

    /// Trust the CA certificates in this PEM file for pulsar+ssl://
    /// (default: the system's roots).
    #[arg(long, global = true, value_name = "FILE")]
    tls_trust_certs: Option<PathBuf>,

    /// Client certificate (PEM) for brokers that require mutual TLS; needs --tls-key.
    #[arg(long, global = true, value_name = "FILE")]
    tls_cert: Option<PathBuf>,

    /// The client certificate's private key (PEM); needs --tls-cert.
    #[arg(long, global = true, value_name = "FILE")]
    tls_key: Option<PathBuf>,

    /// Accept any broker certificate for any host name. Dangerous: for
    /// throw-away test clusters only.
    #[arg(long, global = true)]
    tls_allow_insecure: bool,
}

/// OAuth2 client-credentials flags (the Java client's `AuthenticationOAuth2`).
#[derive(Debug, clap::Args)]
pub(crate) struct OAuth2Args {
    /// Authenticate with OAuth2 client credentials from this issuer
    /// (its token endpoint found through /.well-known/openid-configuration).
    #[arg(long, global = true, value_name = "URL")]
    oauth2_issuer_url: Option<String>,

    /// The OAuth2 key file: JSON with client_id and client_secret.
    #[arg(long, global = true, value_name = "FILE")]
    oauth2_credentials_file: Option<PathBuf>,

    /// The OAuth2 audience (the cluster's, as the issuer knows it).
    #[arg(long, global = true, value_name = "AUDIENCE")]
    oauth2_audience: Option<String>,

    /// The OAuth2 scope.
    #[arg(long, global = true, value_name = "SCOPE")]
    oauth2_scope: Option<String>,
}

/// Where the client's credentials come from.
#[derive(Clone, PartialEq, Eq)]
pub(crate) enum Auth {
    /// A fixed token.
    Token(String),
    /// A token file, re-read for every request.
    TokenFile(PathBuf),
    /// OAuth2 client credentials.
    OAuth2(OAuth2),
}

/// OAuth2 settings; complete once the issuer and the client's key are known.
#[derive(Clone, Default, PartialEq, Eq)]
pub(crate) struct OAuth2 {
    pub(crate) issuer_url: Option<String>,
    pub(crate) key: Option<OAuth2Key>,
    pub(crate) audience: Option<String>,
    pub(crate) scope: Option<String>,
}

/// The OAuth2 client id and secret: a key file, or given inline (a
/// client.conf's `data:` URL).
#[derive(Clone, PartialEq, Eq)]
pub(crate) enum OAuth2Key {
    File(PathBuf),
    Inline { client_id: String, secret: String },
}

impl fmt::Debug for OAuth2Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::File(path) => f.debug_tuple("File").field(path).finish(),
            Self::Inline { client_id, .. } => f
                .debug_struct("Inline")
                .field("client_id", client_id)
                .field("secret", &"<redacted>")
                .finish(),
        }
    }
}

impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Token(_) => f.write_str("Token(<redacted>)"),
            Self::TokenFile(path) => f.debug_tuple("TokenFile").field(path).finish(),
            Self::OAuth2(o) => f
                .debug_struct("OAuth2")
                .field("issuer_url", &o.issuer_url)
                .field("key", &o.key)
                .field("audience", &o.audience)
                .field("scope", &o.scope)
                .finish(),
        }
    }
}

/// Connection settings from one source (flags or a client.conf), or merged.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Settings {
    pub(crate) url: Option<String>,
    pub(crate) auth: Option<Auth>,
    pub(crate) tls_trust_certs: Option<PathBuf>,
    pub(crate) tls_cert: Option<PathBuf>,
    pub(crate) tls_key: Option<PathBuf>,
    pub(crate) tls_allow_insecure: Option<bool>,
}

/// Settings that cannot be used. Never shows a token.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SettingsError {
    /// The client.conf could not be read.
    #[error("cannot read the client configuration {path:?} (from {given_by}): {source}")]
    ReadConf {
        path: PathBuf,
        given_by: &'static str,
        source: std::io::Error,
    },
    /// An authPlugin this command does not support.
    #[error(
        "client configuration: authPlugin {plugin:?} is not supported \
         (supported: org.apache.pulsar.client.impl.auth.AuthenticationToken, AuthenticationTls, oauth2.AuthenticationOAuth2)"
    )]
    UnknownAuthPlugin { plugin: String },
    /// authParams that do not fit the plugin.
    #[error("client configuration: authParams for the {plugin} plugin {problem}")]
    BadAuthParams {
        plugin: &'static str,
        problem: &'static str,
    },
    /// A boolean setting that is neither true nor false.
    #[error("client configuration: {key} must be true or false, not {value:?}")]
    NotABoolean { key: &'static str, value: String },
    /// Half of a pair of settings.
    #[error("{given} is set but {missing} is not: give both")]
    Incomplete {
        given: &'static str,
        missing: &'static str,
    },
}

impl SecurityArgs {
    /// The settings in force: the client.conf (if any), overridden by the
    /// flags and by `url` (`--url`).
    pub(crate) fn resolve(self, url: Option<String>) -> Result<Settings, SettingsError> {
        let (conf, given_by) = match self.conf {
            Some(path) => (Some(path), "--conf"),
            None => (
                std::env::var_os("PULSAR_CLIENT_CONF")
                    .filter(|v| !v.is_empty())
                    .map(PathBuf::from),
                "PULSAR_CLIENT_CONF",
            ),
        };
        let from_file = match conf {
            Some(path) => read_conf(&path, given_by)?,
            None => Settings::default(),
        };
        let o = self.oauth2;
        let oauth2_given = o.oauth2_issuer_url.is_some()
            || o.oauth2_credentials_file.is_some()
            || o.oauth2_audience.is_some()
            || o.oauth2_scope.is_some();
        let auth = match (self.auth_token, self.auth_token_file) {
            (Some(token), _) => Some(Auth::Token(token)),
            (None, Some(path)) => Some(Auth::TokenFile(path)),
            (None, None) if oauth2_given => Some(Auth::OAuth2(OAuth2 {
                issuer_url: o.oauth2_issuer_url,
                key: o.oauth2_credentials_file.map(OAuth2Key::File),
                audience: o.oauth2_audience,
                scope: o.oauth2_scope,
            })),
            (None, None) => None,
        };
        let flags = Settings {
            url,
            auth,
            tls_trust_certs: self.tls_trust_certs,
            tls_cert: self.tls_cert,
            tls_key: self.tls_key,
            tls_allow_insecure: self.tls_allow_insecure.then_some(true),
        };
        from_file.overridden_by(flags).checked()
    }
}

fn read_conf(path: &Path, given_by: &'static str) -> Result<Settings, SettingsError> {
    let text = std::fs::read_to_string(path).map_err(|source| SettingsError::ReadConf {
        path: path.to_owned(),
        given_by,
        source,
    })?;
    client_conf::parse(&text)
}

impl Settings {
    /// `self` with every setting `winner` has replaced by it. A client
    /// certificate and its key go together: a flag for either replaces both.
    fn overridden_by(self, winner: Self) -> Self {
        let tls_pair_given = winner.tls_cert.is_some() || winner.tls_key.is_some();
        let (tls_cert, tls_key) = match tls_pair_given {
            true => (winner.tls_cert, winner.tls_key),
            false => (self.tls_cert, self.tls_key),
        };
        // OAuth2 flags refine the file's OAuth2 settings field by field.
        let auth = match (winner.auth, self.auth) {
            (Some(Auth::OAuth2(flags)), Some(Auth::OAuth2(file))) => Some(Auth::OAuth2(OAuth2 {
                issuer_url: flags.issuer_url.or(file.issuer_url),
                key: flags.key.or(file.key),
                audience: flags.audience.or(file.audience),
                scope: flags.scope.or(file.scope),
            })),
            (winner, file) => winner.or(file),
        };
        Self {
            url: winner.url.or(self.url),
            auth,
            tls_trust_certs: winner.tls_trust_certs.or(self.tls_trust_certs),
            tls_cert,
            tls_key,
            tls_allow_insecure: winner.tls_allow_insecure.or(self.tls_allow_insecure),
        }
    }

    fn checked(self) -> Result<Self, SettingsError> {
        match (&self.tls_cert, &self.tls_key) {
            (Some(_), None) => Err(SettingsError::Incomplete {
                given: "--tls-cert",
                missing: "--tls-key",
            }),
            (None, Some(_)) => Err(SettingsError::Incomplete {
                given: "--tls-key",
                missing: "--tls-cert",
            }),
            _ => Ok(self),
        }
    }

    /// Puts the authentication and TLS settings on `builder` (the URL is
    /// the caller's: it may start an embedded broker instead).
    pub(crate) fn apply(self, mut builder: ClientBuilder) -> Result<ClientBuilder, SettingsError> {
        builder = match self.auth {
            Some(Auth::Token(token)) => {
                builder.authentication(TokenAuthentication::from_token(token))
            }
            Some(Auth::TokenFile(path)) => {
                builder.authentication(TokenAuthentication::from_file(path))
            }
            Some(Auth::OAuth2(o)) => {
                builder.authentication(o.credentials(self.tls_trust_certs.as_deref())?)
            }
            None => builder,
        };
        if let Some(ca) = self.tls_trust_certs {
            builder = builder.tls_trust_certs_file(ca);
        }
        if let (Some(cert), Some(key)) = (self.tls_cert, self.tls_key) {
            builder = builder.tls_client_auth_files(cert, key);
        }
        if self.tls_allow_insecure == Some(true) {
            builder = builder.danger_accept_invalid_certs();
        }
        Ok(builder)
    }
}

impl OAuth2 {
    /// The authentication these settings describe. The issuer is trusted
    /// like the brokers: the system's roots, or the CA file given for TLS.
    fn credentials(self, trust: Option<&Path>) -> Result<OAuth2ClientCredentials, SettingsError> {
        let issuer = self.issuer_url.ok_or(SettingsError::Incomplete {
            given: "OAuth2",
            missing: "--oauth2-issuer-url (issuerUrl)",
        })?;
        let mut auth = match self.key {
            Some(OAuth2Key::Inline { client_id, secret }) => {
                OAuth2ClientCredentials::new(issuer, client_id, secret)
            }
            Some(OAuth2Key::File(path)) => OAuth2ClientCredentials::from_key_file(issuer, path),
            None => {
                return Err(SettingsError::Incomplete {
                    given: "OAuth2",
                    missing: "--oauth2-credentials-file (privateKey)",
                });
            }
        };
        if let Some(audience) = self.audience {
            auth = auth.audience(audience);
        }
        if let Some(scope) = self.scope {
            auth = auth.scope(scope);
        }
        if let Some(ca) = trust {
            auth = auth.tls_trust_certs_file(ca);
        }
        Ok(auth)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(p: &str) -> Option<PathBuf> {
        Some(PathBuf::from(p))
    }

    #[test]
    fn flags_win_setting_by_setting() {
        let file = Settings {
            url: Some("pulsar://from-file:6650".into()),
            auth: Some(Auth::TokenFile("/file/token".into())),
            tls_trust_certs: path("/file/ca.pem"),
            tls_cert: path("/file/c.pem"),
            tls_key: path("/file/k.pem"),
            tls_allow_insecure: Some(false),
        };
        let flags = Settings {
            auth: Some(Auth::Token("from-flag".into())),
            tls_allow_insecure: Some(true),
            ..Settings::default()
        };
        let merged = file.clone().overridden_by(flags);
        assert_eq!(
            merged.url, file.url,
            "no --url: the file's brokerServiceUrl"
        );
        assert_eq!(merged.auth, Some(Auth::Token("from-flag".into())));
        assert_eq!(merged.tls_trust_certs, file.tls_trust_certs);
        assert_eq!(
            (merged.tls_cert, merged.tls_key),
            (file.tls_cert.clone(), file.tls_key.clone())
        );
        assert_eq!(merged.tls_allow_insecure, Some(true));

        let flags = Settings {
            url: Some("pulsar://flag:6650".into()),
            tls_cert: path("/flag/c.pem"),
            ..Settings::default()
        };
        let merged = file.overridden_by(flags);
        assert_eq!(merged.url.as_deref(), Some("pulsar://flag:6650"));
        assert!(
            matches!(
                merged.checked(),
                Err(SettingsError::Incomplete {
                    given: "--tls-cert",
                    ..
                })
            ),
            "a certificate flag does not pair with the file's key"
        );
    }

    #[test]
    fn oauth2_flags_refine_the_files_oauth2_settings() {
        let file = Settings {
            auth: Some(Auth::OAuth2(OAuth2 {
                issuer_url: Some("https://file-issuer".into()),
                key: Some(OAuth2Key::File("/file/key.json".into())),
                audience: Some("file-aud".into()),
                scope: None,
            })),
            ..Settings::default()
        };
        let flags = Settings {
            auth: Some(Auth::OAuth2(OAuth2 {
                audience: Some("flag-aud".into()),
                ..OAuth2::default()
            })),
            ..Settings::default()
        };
        let Some(Auth::OAuth2(o)) = file.overridden_by(flags).auth else {
            panic!("not OAuth2");
        };
        assert_eq!(o.issuer_url.as_deref(), Some("https://file-issuer"));
        assert_eq!(o.audience.as_deref(), Some("flag-aud"));

        let incomplete = OAuth2 {
            issuer_url: Some("https://i".into()),
            ..OAuth2::default()
        };
        assert!(matches!(
            incomplete.credentials(None),
            Err(SettingsError::Incomplete {
                given: "OAuth2",
                ..
            })
        ));
    }

    #[test]
    fn a_token_never_shows_in_debug() {
        let s = Settings {
            auth: Some(Auth::Token("s3cr3t".into())),
            ..Settings::default()
        };
        assert!(!format!("{s:?}").contains("s3cr3t"));
    }
}
