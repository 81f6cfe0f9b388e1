//! Authentication: the [`Authentication`] trait and token credentials.
//!
//! A connection asks its [`Authentication`] for credentials twice: for
//! CONNECT, and again whenever the broker sends AUTH_CHALLENGE (brokers do
//! that when the credentials of a long-lived connection are about to
//! expire). Providers therefore hand out *fresh* credentials on every call:
//! [`TokenAuthentication::from_file`] re-reads its file, so rotating the
//! token on disk keeps established connections alive.
//!
//! Credentials never appear in logs, `Debug` output or error messages: the
//! types here write `<redacted>` instead, and [`AuthError`] names the file
//! or variable, never its content.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use futures::future::BoxFuture;

use crate::wire::commands::AuthPayload;

pub(crate) mod jwt;
#[cfg(feature = "oauth2")]
mod oauth2;
mod token;

#[cfg(feature = "oauth2")]
pub use oauth2::{OAuth2ClientCredentials, OAuth2Error};
pub use token::TokenAuthentication;

/// A way of authenticating to Pulsar: a method name and fresh credentials.
///
/// Implement it for methods this crate does not ship. `credentials` is
/// called for CONNECT and for every AUTH_CHALLENGE, so it may do IO (read a
/// file, ask a token service); it must not cache past the credentials'
/// validity. Implementations' `Debug` must not print secrets.
///
/// # Examples
/// ```
/// use bytes::Bytes;
/// use futures::future::BoxFuture;
/// use pulsar_wire::auth::{AuthError, Authentication};
///
/// /// A token minted per call by some service (a stand-in here).
/// #[derive(Debug)]
/// struct Minted;
///
/// impl Authentication for Minted {
///     fn method(&self) -> &str { "token" }
///     fn credentials(&self) -> BoxFuture<'_, Result<Bytes, AuthError>> {
///         Box::pin(async { Ok(Bytes::from_static(b"eyJ...")) })
///     }
/// }
/// ```
pub trait Authentication: fmt::Debug + Send + Sync + 'static {
    /// The method name sent in CONNECT and AUTH_RESPONSE, e.g. `"token"`.
    fn method(&self) -> &str;

    /// Fresh credentials (the method's auth data).
    ///
    /// # Errors
    /// An [`AuthError`] when no credentials can be had; the connection
    /// attempt (or, on AUTH_CHALLENGE, the connection) then fails with it.
    fn credentials(&self) -> BoxFuture<'_, Result<Bytes, AuthError>>;
}

/// Why credentials could not be obtained. Never contains the credentials.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// The token file could not be read.
    #[error("cannot read token file {path:?}: {source}")]
    TokenFile {
        /// The file.
        path: PathBuf,
        /// Why.
        source: Arc<std::io::Error>,
    },
    /// The token environment variable is unset or not valid UTF-8.
    #[error("token environment variable {var} is unset or not UTF-8")]
    TokenEnv {
        /// The variable's name.
        var: String,
    },
    /// The token (from wherever it came) is empty.
    #[error("the token from {source_name} is empty")]
    EmptyToken {
        /// Where it came from: `"the given string"`, a file or a variable.
        source_name: String,
    },
    /// No OAuth2 access token could be had.
    #[cfg(feature = "oauth2")]
    #[error(transparent)]
    OAuth2(Box<OAuth2Error>),
    /// A custom [`Authentication`] failed.
    #[error("{method} authentication failed: {source}")]
    Provider {
        /// The method name.
        method: String,
        /// Why (the provider's own error; it must not carry secrets).
        source: Arc<dyn std::error::Error + Send + Sync>,
    },
}

/// Fixed credentials of any method.
impl Authentication for AuthPayload {
    fn method(&self) -> &str {
        &self.method
    }

    fn credentials(&self) -> BoxFuture<'_, Result<Bytes, AuthError>> {
        let data = self.data.clone();
        Box::pin(async move { Ok(data) })
    }
}

/// What an authentication or authorization failure was, for callers to
/// branch on (see [`Error::auth_failure`](crate::error::Error::auth_failure)).
///
/// The broker answers every refused credential with the same code and text
/// ("Failed to authenticate"); the client tells an expired token from
/// other refusals by the token's own `exp` claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AuthFailure {
    /// The broker refused the credentials, and the token's `exp` had
    /// passed: fresh credentials will do.
    Expired,
    /// The broker refused the credentials for another reason: a bad
    /// signature (a token made with another key), a malformed token, an
    /// unknown method, or none given where the broker needs some.
    Rejected,
    /// The credentials were accepted, but their role may not do this
    /// (look up, produce to or consume from the topic): a permission must
    /// be granted to the role.
    Unauthorized,
}

#[cfg(feature = "oauth2")]
impl From<OAuth2Error> for AuthError {
    fn from(e: OAuth2Error) -> Self {
        Self::OAuth2(Box::new(e))
    }
}

impl fmt::Display for AuthFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Expired => "the token has expired",
            Self::Rejected => {
                "not accepted: a bad signature, another key, a malformed token or no credentials"
            }
            Self::Unauthorized => "the role has no permission for this",
        })
    }
}

/// The [`AuthFailure`] of the first [`ConnectionError`](crate::connection::ConnectionError)
/// in `error`'s source chain (itself included) that is one.
pub(crate) fn failure_in(error: &(dyn std::error::Error + 'static)) -> Option<AuthFailure> {
    let mut link = Some(error);
    while let Some(e) = link {
        if let Some(c) = e.downcast_ref::<crate::connection::ConnectionError>() {
            if let Some(failure) = c.auth_failure() {
                return Some(failure);
            }
        }
        link = e.source();
    }
    None
}

/// Asks `auth` for fresh credentials, paired with its method name.
pub(crate) async fn fetch(auth: &dyn Authentication) -> Result<AuthPayload, AuthError> {
    let data = auth.credentials().await?;
    Ok(AuthPayload {
        method: auth.method().to_owned(),
        data,
    })
}
