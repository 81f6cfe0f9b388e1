//! [`TokenAuthentication`]: the `token` method, from a string, a file or
//! an environment variable.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use futures::future::BoxFuture;

use super::{AuthError, Authentication};

/// Where a [`TokenAuthentication`] gets its token.
#[derive(Clone)]
enum TokenSource {
    Static(Bytes),
    File(PathBuf),
    Env(String),
}

/// The `token` method: a JWT (or any bearer token) from a string, a file or
/// an environment variable. Surrounding whitespace (a trailing newline in a
/// file, say) is trimmed.
///
/// # Examples
/// ```
/// use pulsar_wire::auth::TokenAuthentication;
/// let auth = TokenAuthentication::from_token("eyJhbGciOiJIUzI1NiJ9.secret");
/// assert!(!format!("{auth:?}").contains("secret"));
/// let rotating = TokenAuthentication::from_file("/var/run/secrets/pulsar/token");
/// let from_env = TokenAuthentication::from_env("PULSAR_TOKEN");
/// # let _ = (rotating, from_env);
/// ```
#[derive(Clone)]
pub struct TokenAuthentication {
    source: TokenSource,
}

impl TokenAuthentication {
    /// A fixed token.
    pub fn from_token(token: impl Into<String>) -> Self {
        Self {
            source: TokenSource::Static(Bytes::from(token.into().trim().to_owned())),
        }
    }

    /// The token in `path`, read afresh for every CONNECT and
    /// AUTH_CHALLENGE, so a rotated file is picked up without reconnecting.
    pub fn from_file(path: impl Into<PathBuf>) -> Self {
        Self {
            source: TokenSource::File(path.into()),
        }
    }

    /// The token in environment variable `var`, read at each request.
    pub fn from_env(var: impl Into<String>) -> Self {
        Self {
            source: TokenSource::Env(var.into()),
        }
    }

    async fn token(&self) -> Result<Bytes, AuthError> {
        let (token, source_name) = match &self.source {
            TokenSource::Static(token) => (token.clone(), "the given string".to_owned()),
            TokenSource::File(path) => {
                let text =
                    tokio::fs::read_to_string(path)
                        .await
                        .map_err(|e| AuthError::TokenFile {
                            path: path.clone(),
                            source: Arc::new(e),
                        })?;
                (Bytes::from(text.trim().to_owned()), format!("{path:?}"))
            }
            TokenSource::Env(var) => {
                let text =
                    std::env::var(var).map_err(|_| AuthError::TokenEnv { var: var.clone() })?;
                (Bytes::from(text.trim().to_owned()), var.clone())
            }
        };
        if token.is_empty() {
            return Err(AuthError::EmptyToken { source_name });
        }
        Ok(token)
    }
}

impl Authentication for TokenAuthentication {
    fn method(&self) -> &str {
        "token"
    }

    fn credentials(&self) -> BoxFuture<'_, Result<Bytes, AuthError>> {
        Box::pin(self.token())
    }
}

impl fmt::Debug for TokenAuthentication {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = f.debug_struct("TokenAuthentication");
        match &self.source {
            TokenSource::Static(_) => s.field("token", &"<redacted>"),
            TokenSource::File(path) => s.field("file", path),
            TokenSource::Env(var) => s.field("env", var),
        };
        s.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::fetch;

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
            .block_on(f)
    }

    #[test]
    fn debug_never_shows_a_static_token() {
        let auth = TokenAuthentication::from_token(" s3cr3t\n");
        let shown = format!("{auth:?}");
        assert!(
            shown.contains("<redacted>") && !shown.contains("s3cr3t"),
            "{shown}"
        );
        let payload = block_on(fetch(&auth)).expect("token");
        assert_eq!(
            (payload.method.as_str(), &payload.data[..]),
            ("token", &b"s3cr3t"[..])
        );
    }

    #[test]
    fn a_missing_file_or_variable_is_a_typed_error_without_secrets() {
        let err = block_on(fetch(&TokenAuthentication::from_file("/nonexistent/tok")));
        assert!(matches!(err, Err(AuthError::TokenFile { .. })), "{err:?}");
        let var = "PULSAR_WIRE_TEST_SURELY_UNSET_VAR";
        let err = block_on(fetch(&TokenAuthentication::from_env(var)));
        assert!(matches!(err, Err(AuthError::TokenEnv { .. })), "{err:?}");
        let err = block_on(fetch(&TokenAuthentication::from_token("  ")));
        assert!(matches!(err, Err(AuthError::EmptyToken { .. })), "{err:?}");
    }

    #[test]
    fn a_token_file_is_read_afresh_each_time() {
        let path = std::env::temp_dir().join(format!("pulsar-wire-token-{}", std::process::id()));
        let auth = TokenAuthentication::from_file(&path);
        std::fs::write(&path, "first\n").expect("write");
        assert_eq!(&block_on(fetch(&auth)).expect("first").data[..], b"first");
        std::fs::write(&path, "second").expect("rewrite");
        assert_eq!(&block_on(fetch(&auth)).expect("second").data[..], b"second");
        let _ = std::fs::remove_file(&path);
        assert!(!format!("{auth:?}").contains("second"));
    }
}
