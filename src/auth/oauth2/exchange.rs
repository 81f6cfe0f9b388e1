//! Pure: the OAuth2 client-credentials exchange as data. Key file and
//! issuer answers in, form bodies and cached tokens out; no IO, and `now`
//! comes from the caller.

use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::clock;

/// The share of a token's lifetime after which a fresh one is fetched
/// (the Java client's `EXPIRY_ADJUSTMENT`): a 1-hour token is replaced
/// after 54 minutes.
pub(crate) const REFRESH_AT_SHARE: f64 = 0.9;

/// A client id and secret.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct ClientSecret {
    pub(crate) client_id: String,
    pub(crate) client_secret: String,
}

impl std::fmt::Debug for ClientSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientSecret")
            .field("client_id", &self.client_id)
            .field("client_secret", &"<redacted>")
            .finish()
    }
}

/// Reads a key file as the Java client's `AuthenticationOAuth2` does:
/// `{"client_id": ..., "client_secret": ...}` (other fields ignored).
pub(crate) fn key_file(text: &str) -> Result<ClientSecret, &'static str> {
    let json: serde_json::Value = serde_json::from_str(text).map_err(|_| "is not a JSON object")?;
    let field = |name| json.get(name).and_then(serde_json::Value::as_str);
    match (field("client_id"), field("client_secret")) {
        (Some(id), Some(secret)) if !id.is_empty() => Ok(ClientSecret {
            client_id: id.to_owned(),
            client_secret: secret.to_owned(),
        }),
        _ => Err("needs string fields client_id and client_secret"),
    }
}

/// `<issuer>/.well-known/openid-configuration`.
pub(crate) fn discovery_url(issuer_url: &str) -> String {
    format!(
        "{}/.well-known/openid-configuration",
        issuer_url.trim_end_matches('/')
    )
}

/// The `token_endpoint` of a discovery document.
pub(crate) fn token_endpoint(body: &[u8]) -> Result<String, &'static str> {
    let json: serde_json::Value =
        serde_json::from_slice(body).map_err(|_| "the discovery document is not JSON")?;
    json.get("token_endpoint")
        .and_then(serde_json::Value::as_str)
        .filter(|e| !e.is_empty())
        .map(str::to_owned)
        .ok_or("the discovery document names no token_endpoint")
}

/// The token request's form body (RFC 6749 4.4.2; the client
/// authenticates with `client_id` and `client_secret` in the body, as the
/// Java client does).
pub(crate) fn token_request(
    secret: &ClientSecret,
    audience: Option<&str>,
    scope: Option<&str>,
) -> String {
    let mut fields = vec![
        ("grant_type", "client_credentials"),
        ("client_id", secret.client_id.as_str()),
        ("client_secret", secret.client_secret.as_str()),
    ];
    fields.extend(audience.map(|a| ("audience", a)));
    fields.extend(scope.map(|s| ("scope", s)));
    fields
        .iter()
        .map(|(k, v)| format!("{k}={}", form_encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// `application/x-www-form-urlencoded` value encoding.
fn form_encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'*' => {
                out.push(b as char);
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// A token as the issuer handed it out.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Issued {
    pub(crate) access_token: Bytes,
    /// `expires_in`, if the issuer gave a number of seconds of at least
    /// zero; one too large for a `Duration` is `Duration::MAX`.
    pub(crate) lifetime: Option<Duration>,
}

impl std::fmt::Debug for Issued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issued")
            .field("access_token", &"<redacted>")
            .field("lifetime", &self.lifetime)
            .finish()
    }
}

/// A successful token response: `access_token` and `expires_in`.
pub(crate) fn token_response(body: &[u8]) -> Result<Issued, &'static str> {
    let json: serde_json::Value =
        serde_json::from_slice(body).map_err(|_| "the token response is not JSON")?;
    let token = json
        .get("access_token")
        .and_then(serde_json::Value::as_str)
        .filter(|t| !t.is_empty())
        .ok_or("the token response has no access_token")?;
    Ok(Issued {
        access_token: Bytes::from(token.to_owned()),
        lifetime: json
            .get("expires_in")
            .and_then(serde_json::Value::as_f64)
            .and_then(lifetime),
    })
}

/// An `expires_in` of `secs` as a lifetime: none if negative or not a
/// number, saturated at `Duration::MAX` if too large.
fn lifetime(secs: f64) -> Option<Duration> {
    if secs.is_nan() || secs < 0.0 {
        return None;
    }
    Some(Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX))
}

/// The OAuth2 `error` code of a refusal (`invalid_client`, …), if the body
/// has one: short and standard, never a secret.
pub(crate) fn error_code(body: &[u8]) -> Option<String> {
    let json: serde_json::Value = serde_json::from_slice(body).ok()?;
    let code = json.get("error")?.as_str()?;
    let printable = code.len() <= 64 && code.bytes().all(|b| b.is_ascii_graphic());
    printable.then(|| code.to_owned())
}

/// The token in use and when to fetch the next one.
#[derive(Debug, Default)]
pub(crate) struct Cache {
    current: Option<(Issued, Option<Instant>)>,
}

impl Cache {
    /// The cached token, unless it is due for a refresh at `now`. A token
    /// without a lifetime is never reused: there is no telling when it ends.
    pub(crate) fn valid(&self, now: Instant) -> Option<Bytes> {
        match &self.current {
            Some((issued, Some(refresh_at))) if now < *refresh_at => {
                Some(issued.access_token.clone())
            }
            _ => None,
        }
    }

    /// Keeps `issued`, fetched at `now`, until [`REFRESH_AT_SHARE`] of its
    /// lifetime; a lifetime past about a century counts as a century.
    pub(crate) fn store(&mut self, issued: Issued, now: Instant) -> Bytes {
        let refresh_at = issued.lifetime.map(|lifetime| {
            let share = Duration::try_from_secs_f64(lifetime.as_secs_f64() * REFRESH_AT_SHARE)
                .unwrap_or(Duration::MAX);
            clock::after(now, share)
        });
        let token = issued.access_token.clone();
        self.current = Some((issued, refresh_at));
        token
    }

    /// When the cached token is due for a refresh, if one is cached.
    #[cfg(test)]
    pub(crate) fn refresh_at(&self) -> Option<Instant> {
        self.current.as_ref().and_then(|(_, at)| *at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn reads_the_java_clients_key_file() {
        let secret = key_file(
            r#"{"type":"client_credentials","client_id":"app","client_secret":"s3cr3t","client_email":"a@b","issuer_url":"https://i"}"#,
        )
        .expect("key file");
        assert_eq!(
            (secret.client_id.as_str(), secret.client_secret.as_str()),
            ("app", "s3cr3t")
        );
        assert!(!format!("{secret:?}").contains("s3cr3t"));
        assert!(key_file("{}").is_err());
        assert!(key_file(r#"{"client_id":"","client_secret":"x"}"#).is_err());
        assert!(key_file("not json").is_err());
    }

    #[test]
    fn discovery_and_token_endpoint() {
        assert_eq!(
            discovery_url("https://auth.example.com/tenant/"),
            "https://auth.example.com/tenant/.well-known/openid-configuration"
        );
        assert_eq!(
            token_endpoint(br#"{"issuer":"x","token_endpoint":"https://x/oauth/token"}"#),
            Ok("https://x/oauth/token".to_owned())
        );
        assert!(token_endpoint(br#"{"issuer":"x"}"#).is_err());
        assert!(token_endpoint(b"<html>").is_err());
    }

    #[test]
    fn the_form_body_is_url_encoded() {
        let secret = ClientSecret {
            client_id: "my app".into(),
            client_secret: "a&b=c/d".into(),
        };
        assert_eq!(
            token_request(&secret, Some("urn:pulsar:aud"), Some("read write")),
            "grant_type=client_credentials&client_id=my+app&client_secret=a%26b%3Dc%2Fd\
             &audience=urn%3Apulsar%3Aaud&scope=read+write"
        );
        assert_eq!(
            token_request(&secret, None, None),
            "grant_type=client_credentials&client_id=my+app&client_secret=a%26b%3Dc%2Fd"
        );
    }

    #[test]
    fn token_responses_and_refusals() {
        let issued =
            token_response(br#"{"access_token":"eyJ","token_type":"Bearer","expires_in":3600}"#)
                .expect("token");
        assert_eq!(
            (&issued.access_token[..], issued.lifetime),
            (&b"eyJ"[..], Some(secs(3600)))
        );
        assert_eq!(
            token_response(br#"{"access_token":"t"}"#)
                .expect("t")
                .lifetime,
            None
        );
        assert!(token_response(br#"{"token_type":"Bearer"}"#).is_err());
        assert_eq!(
            error_code(br#"{"error":"invalid_client"}"#).as_deref(),
            Some("invalid_client")
        );
        assert_eq!(error_code(b"nope"), None);
        assert_eq!(error_code(br#"{"error":"has spaces in it"}"#), None);
    }

    #[test]
    fn absurd_lifetimes_neither_panic_nor_overflow() {
        let lifetime = |expires_in: &str| {
            token_response(
                format!(r#"{{"access_token":"t","expires_in":{expires_in}}}"#).as_bytes(),
            )
            .expect(expires_in)
            .lifetime
        };
        assert_eq!(lifetime("0.5"), Some(Duration::from_millis(500)));
        assert_eq!(lifetime("1e19"), Some(secs(10_000_000_000_000_000_000)));
        for huge in ["1.8446744073709552e19", "1e20", "1e300"] {
            assert_eq!(lifetime(huge), Some(Duration::MAX), "{huge}: saturated");
        }
        for meaningless in ["-1", "-1e300", "\"3600\"", "null"] {
            assert_eq!(lifetime(meaningless), None, "{meaningless}: never reused");
        }

        let t0 = crate::clock::now();
        let mut cache = Cache::default();
        cache.store(
            Issued {
                access_token: Bytes::from_static(b"long"),
                lifetime: Some(Duration::MAX),
            },
            t0,
        );
        let year = secs(365 * 24 * 3600);
        assert!(cache.refresh_at() > Some(t0 + 50 * year), "due far ahead");
        assert_eq!(cache.valid(t0 + year).as_deref(), Some(&b"long"[..]));
    }

    #[test]
    fn a_token_is_reused_until_nine_tenths_of_its_lifetime() {
        let t0 = crate::clock::now();
        let mut cache = Cache::default();
        assert_eq!(cache.valid(t0), None);
        let issued = |t: &'static str, l: Option<u64>| Issued {
            access_token: Bytes::from_static(t.as_bytes()),
            lifetime: l.map(secs),
        };
        cache.store(issued("a", Some(100)), t0);
        assert_eq!(cache.refresh_at(), Some(t0 + secs(90)));
        assert_eq!(cache.valid(t0 + secs(89)).as_deref(), Some(&b"a"[..]));
        assert_eq!(
            cache.valid(t0 + secs(90)),
            None,
            "refreshed before it expires"
        );
        cache.store(issued("b", None), t0 + secs(90));
        assert_eq!(
            cache.valid(t0 + secs(90)),
            None,
            "no lifetime: never reused"
        );
    }
}
