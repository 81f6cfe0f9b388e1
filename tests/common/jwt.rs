//! HS256 JWTs as Apache Pulsar's `AuthenticationProviderToken` checks them:
//! `{"alg":"HS256"}` . `{"sub": role, "exp": seconds}` . HMAC-SHA256 over
//! the first two parts with the broker's secret key. HMAC comes from
//! `ring` (already in the tree through rustls); the rest is a few lines.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// Seconds since the Unix epoch, for `exp` claims (the wall clock is what
/// the broker compares `exp` with).
#[allow(clippy::disallowed_methods)] // a JWT's `exp` is wall-clock time by definition
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs()
}

/// A token for `role`, valid until `exp` (Unix seconds) or for ever.
pub fn mint(key: &[u8], role: &str, exp: Option<u64>) -> String {
    mint_with(key, role, exp, &[])
}

/// Like [`mint`], with more string claims.
pub fn mint_with(key: &[u8], role: &str, exp: Option<u64>, extra: &[(&str, String)]) -> String {
    let mut claims = serde_json::json!({ "sub": role });
    if let Some(exp) = exp {
        claims["exp"] = exp.into();
    }
    for (name, value) in extra {
        claims[*name] = value.clone().into();
    }
    let signing_input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256"}"#),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, key);
    let signature = ring::hmac::sign(&key, signing_input.as_bytes());
    format!(
        "{signing_input}.{}",
        URL_SAFE_NO_PAD.encode(signature.as_ref())
    )
}
