//! Pure: the `client.conf` the official Pulsar command-line tools read
//! (Java properties), turned into [`Settings`].
//!
//! Read: `brokerServiceUrl`, `authPlugin` with `authParams`,
//! `tlsTrustCertsFilePath`, `tlsAllowInsecureConnection`,
//! `tlsCertificateFilePath` and `tlsKeyFilePath`. Every other key
//! (`webServiceUrl`, `tlsEnableHostnameVerification`, …) is ignored: this
//! client speaks only the binary protocol and always checks host names
//! unless told to accept any certificate.

use std::collections::HashMap;
use std::path::PathBuf;

use base64::Engine as _;

use crate::settings::{Auth, OAuth2, OAuth2Key, Settings, SettingsError};

/// The settings a `client.conf` holds.
pub(crate) fn parse(text: &str) -> Result<Settings, SettingsError> {
    let props = properties(text);
    let get = |key: &str| props.get(key).map(String::as_str).filter(|v| !v.is_empty());
    let mut settings = Settings {
        url: get("brokerServiceUrl").map(str::to_owned),
        tls_trust_certs: get("tlsTrustCertsFilePath").map(PathBuf::from),
        tls_cert: get("tlsCertificateFilePath").map(PathBuf::from),
        tls_key: get("tlsKeyFilePath").map(PathBuf::from),
        ..Settings::default()
    };
    if let Some(value) = get("tlsAllowInsecureConnection") {
        settings.tls_allow_insecure = Some(boolean("tlsAllowInsecureConnection", value)?);
    }
    if let Some(plugin) = get("authPlugin") {
        let params = get("authParams").unwrap_or("");
        match plugin_kind(plugin)? {
            PluginKind::Token => settings.auth = Some(token_params(params)?),
            PluginKind::OAuth2 => settings.auth = Some(Auth::OAuth2(oauth2_params(params)?)),
            PluginKind::Tls => {
                let (cert, key) = tls_params(params)?;
                settings.tls_cert = Some(cert);
                settings.tls_key = Some(key);
            }
        }
    }
    Ok(settings)
}

enum PluginKind {
    Token,
    Tls,
    OAuth2,
}

/// The authentication plugin named by its Java class (or its short name).
fn plugin_kind(plugin: &str) -> Result<PluginKind, SettingsError> {
    const AUTH: &str = "org.apache.pulsar.client.impl.auth.";
    match plugin.strip_prefix(AUTH).unwrap_or(plugin) {
        "AuthenticationToken" | "token" => Ok(PluginKind::Token),
        "AuthenticationTls" | "tls" => Ok(PluginKind::Tls),
        "oauth2.AuthenticationOAuth2" | "oauth2" => Ok(PluginKind::OAuth2),
        _ => Err(SettingsError::UnknownAuthPlugin {
            plugin: plugin.to_owned(),
        }),
    }
}

/// `authParams` of the token plugin: `token:<jwt>`, `file:///path`, JSON
/// `{"token": "<jwt>"}`, or the bare token (as the Java client reads them).
fn token_params(params: &str) -> Result<Auth, SettingsError> {
    if let Some(token) = params.strip_prefix("token:") {
        return Ok(Auth::Token(token.trim().to_owned()));
    }
    if params.starts_with("file:") {
        return Ok(Auth::TokenFile(file_url_path(params)));
    }
    if params.trim_start().starts_with('{') {
        let json: serde_json::Value =
            serde_json::from_str(params).map_err(|_| bad_params("token", "is not valid JSON"))?;
        return match json.get("token").and_then(|t| t.as_str()) {
            Some(token) => Ok(Auth::Token(token.trim().to_owned())),
            None => Err(bad_params("token", "has no \"token\" string")),
        };
    }
    match params.trim() {
        "" => Err(bad_params("token", "is empty")),
        token => Ok(Auth::Token(token.to_owned())),
    }
}

/// `authParams` of the OAuth2 plugin, JSON as the Java client reads it:
/// `{"type": "client_credentials", "issuerUrl": ..., "privateKey":
/// "file:///key.json" | "data:application/json;base64,...", "audience": ...,
/// "scope": ...}`.
fn oauth2_params(params: &str) -> Result<OAuth2, SettingsError> {
    let json: HashMap<String, serde_json::Value> =
        serde_json::from_str(params).map_err(|_| bad_params("oauth2", "is not a JSON object"))?;
    let text = |key: &str| {
        json.get(key)
            .and_then(|v| v.as_str())
            .filter(|v| !v.is_empty())
    };
    if text("type").is_some_and(|t| t != "client_credentials") {
        return Err(bad_params(
            "oauth2",
            "has a type other than client_credentials",
        ));
    }
    let key = match text("privateKey") {
        Some(data) if data.starts_with("data:") => Some(inline_key(data)?),
        Some(file) => Some(OAuth2Key::File(file_url_path(file))),
        None => None,
    };
    Ok(OAuth2 {
        issuer_url: text("issuerUrl").map(str::to_owned),
        key,
        audience: text("audience").map(str::to_owned),
        scope: text("scope").map(str::to_owned),
    })
}

/// A key file inline: `data:application/json;base64,<key file>`.
fn inline_key(url: &str) -> Result<OAuth2Key, SettingsError> {
    let bad = || {
        bad_params(
            "oauth2",
            "has a privateKey data: URL that is not a base64 key file",
        )
    };
    let (_, encoded) = url.split_once(";base64,").ok_or_else(bad)?;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .map_err(|_| bad())?;
    let json: serde_json::Value = serde_json::from_slice(&decoded).map_err(|_| bad())?;
    let field = |k: &str| json.get(k).and_then(|v| v.as_str()).map(str::to_owned);
    match (field("client_id"), field("client_secret")) {
        (Some(client_id), Some(secret)) => Ok(OAuth2Key::Inline { client_id, secret }),
        _ => Err(bad()),
    }
}

/// `authParams` of the TLS plugin: `tlsCertFile:<path>,tlsKeyFile:<path>`
/// or the same two keys as JSON.
fn tls_params(params: &str) -> Result<(PathBuf, PathBuf), SettingsError> {
    let pairs: HashMap<String, String> = if params.trim_start().starts_with('{') {
        let json: HashMap<String, serde_json::Value> =
            serde_json::from_str(params).map_err(|_| bad_params("tls", "is not valid JSON"))?;
        json.into_iter()
            .filter_map(|(k, v)| Some((k, v.as_str()?.to_owned())))
            .collect()
    } else {
        params
            .split(',')
            .filter_map(|pair| pair.split_once(':'))
            .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
            .collect()
    };
    let path = |key: &str| {
        pairs
            .get(key)
            .map(|v| file_url_path(v))
            .ok_or_else(|| bad_params("tls", "needs tlsCertFile and tlsKeyFile"))
    };
    Ok((path("tlsCertFile")?, path("tlsKeyFile")?))
}

/// The path of `file:///p`, `file:/p` or a plain path.
fn file_url_path(url: &str) -> PathBuf {
    let path = url
        .strip_prefix("file://")
        .or_else(|| url.strip_prefix("file:"))
        .unwrap_or(url);
    PathBuf::from(path.trim())
}

fn bad_params(plugin: &'static str, problem: &'static str) -> SettingsError {
    SettingsError::BadAuthParams { plugin, problem }
}

fn boolean(key: &'static str, value: &str) -> Result<bool, SettingsError> {
    match value.to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(SettingsError::NotABoolean {
            key,
            value: value.to_owned(),
        }),
    }
}

/// Java properties: `key=value`, `key: value` or `key value` lines, `#` and
/// `!` comments, a trailing backslash continuing the line, and the
/// escapes `\t \n \r \f \\ \uXXXX`. Later keys win.
fn properties(text: &str) -> HashMap<String, String> {
    let mut props = HashMap::new();
    let mut lines = text.lines();
    while let Some(first) = lines.next() {
        let mut line = first.trim_start().to_owned();
        if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
            continue;
        }
        while ends_in_continuation(&line) {
            line.pop();
            match lines.next() {
                Some(next) => line.push_str(next.trim_start()),
                None => break,
            }
        }
        let (key, value) = split_key(&line);
        props.insert(unescape(key), unescape(value.trim_end()));
    }
    props
}

/// An odd number of trailing backslashes continues the line.
fn ends_in_continuation(line: &str) -> bool {
    line.bytes().rev().take_while(|&b| b == b'\\').count() % 2 == 1
}

/// Splits at the first unescaped `=`, `:` or whitespace; skips the
/// separator and the whitespace around it.
fn split_key(line: &str) -> (&str, &str) {
    let mut escaped = false;
    for (i, c) in line.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '=' | ':' => return (&line[..i], line[i + 1..].trim_start()),
            c if c.is_whitespace() => {
                let rest = line[i..].trim_start();
                let rest = rest.strip_prefix(['=', ':']).map_or(rest, str::trim_start);
                return (&line[..i], rest);
            }
            _ => {}
        }
    }
    (line, "")
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\u{c}'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    Some(ch) => out.push(ch),
                    None => out.push_str(&hex),
                }
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// The file the Pulsar distribution ships, filled in for a secured cluster.
    const SHIPPED: &str = r#"
# Configuration for pulsar-client and pulsar-admin CLI tools

# URL for Pulsar REST API (for admin operations)
# For TLS:
# webServiceUrl=https://localhost:8443/
webServiceUrl=https://pulsar.example.com:8443/

# URL for Pulsar Binary Protocol (for produce and consume operations)
brokerServiceUrl=pulsar+ssl://pulsar.example.com:6651/

# Authentication plugin to authenticate with servers
authPlugin=org.apache.pulsar.client.impl.auth.AuthenticationToken

# Parameters passed to authentication plugin.
authParams=file:///etc/pulsar/token.jwt

# Allow TLS connections to servers whose certificate cannot be
# be verified to have been signed by a trusted certificate
# authority.
tlsAllowInsecureConnection=false

# Whether server hostname must match the common name of the certificate
tlsEnableHostnameVerification=false

tlsTrustCertsFilePath=/etc/pulsar/ca.pem
useKeyStoreTls=false
"#;

    #[test]
    fn the_shipped_file_filled_in() {
        let s = parse(SHIPPED).expect("parse");
        assert_eq!(
            s.url.as_deref(),
            Some("pulsar+ssl://pulsar.example.com:6651/")
        );
        assert!(
            matches!(s.auth, Some(Auth::TokenFile(ref p)) if p == &PathBuf::from("/etc/pulsar/token.jwt"))
        );
        assert_eq!(s.tls_trust_certs, Some(PathBuf::from("/etc/pulsar/ca.pem")));
        assert_eq!(s.tls_allow_insecure, Some(false));
        assert_eq!((s.tls_cert, s.tls_key), (None, None));
    }

    #[test]
    fn blank_values_are_unset_as_in_the_shipped_defaults() {
        let s = parse("brokerServiceUrl=\nauthPlugin=\nauthParams=\ntlsTrustCertsFilePath=\n")
            .expect("parse");
        assert!(s.url.is_none() && s.auth.is_none() && s.tls_trust_certs.is_none());
    }

    fn token_of(params: &str) -> Auth {
        let conf = format!(
            "authPlugin=org.apache.pulsar.client.impl.auth.AuthenticationToken\nauthParams={params}\n"
        );
        parse(&conf).expect("parse").auth.expect("auth")
    }

    #[test]
    fn token_params_in_every_form_the_java_client_reads() {
        assert!(matches!(token_of("token:eyJ.a.b"), Auth::Token(t) if t == "eyJ.a.b"));
        assert!(matches!(token_of("eyJ.a.b"), Auth::Token(t) if t == "eyJ.a.b"));
        assert!(matches!(token_of(r#"{"token":"eyJ.a.b"}"#), Auth::Token(t) if t == "eyJ.a.b"));
        assert!(
            matches!(token_of("file:///t/jwt"), Auth::TokenFile(p) if p == Path::new("/t/jwt"))
        );
        assert!(matches!(token_of("file:/t/jwt"), Auth::TokenFile(p) if p == Path::new("/t/jwt")));
        let short = parse("authPlugin=token\nauthParams=token:x").expect("short name");
        assert!(matches!(short.auth, Some(Auth::Token(t)) if t == "x"));
    }

    #[test]
    fn bad_auth_settings_are_typed_errors() {
        let err = |conf: &str| parse(conf).expect_err(conf);
        assert!(matches!(
            err("authPlugin=com.example.Kerberos\nauthParams=x"),
            SettingsError::UnknownAuthPlugin { plugin } if plugin == "com.example.Kerberos"
        ));
        assert!(matches!(
            err("authPlugin=token\nauthParams={\"tok\":1}"),
            SettingsError::BadAuthParams {
                plugin: "token",
                ..
            }
        ));
        assert!(matches!(
            err("authPlugin=token\n"),
            SettingsError::BadAuthParams {
                plugin: "token",
                ..
            }
        ));
        assert!(matches!(
            err("tlsAllowInsecureConnection=yes"),
            SettingsError::NotABoolean {
                key: "tlsAllowInsecureConnection",
                ..
            }
        ));
        let shown = err("authPlugin=token\nauthParams={\"secret\":\"s3cr3t\"}").to_string();
        assert!(!shown.contains("s3cr3t"), "{shown}");
    }

    #[test]
    fn oauth2_params_as_the_java_client_reads_them() {
        let conf = "authPlugin=org.apache.pulsar.client.impl.auth.oauth2.AuthenticationOAuth2\n\
            authParams={\"type\":\"client_credentials\",\"issuerUrl\":\"https://auth.example.com/\",\
            \"privateKey\":\"file:///etc/pulsar/key.json\",\"audience\":\"urn:aud\",\"scope\":\"s\"}";
        let Some(Auth::OAuth2(o)) = parse(conf).expect("parse").auth else {
            panic!("not OAuth2");
        };
        assert_eq!(o.issuer_url.as_deref(), Some("https://auth.example.com/"));
        assert_eq!(o.key, Some(OAuth2Key::File("/etc/pulsar/key.json".into())));
        assert_eq!(
            (o.audience.as_deref(), o.scope.as_deref()),
            (Some("urn:aud"), Some("s"))
        );

        // {"client_id":"id","client_secret":"s3cr3t"}
        let inline = "authPlugin=oauth2\nauthParams={\"issuerUrl\":\"https://i\",\"privateKey\":\
            \"data:application/json;base64,eyJjbGllbnRfaWQiOiJpZCIsImNsaWVudF9zZWNyZXQiOiJzM2NyM3QifQ==\"}";
        let Some(Auth::OAuth2(o)) = parse(inline).expect("parse").auth else {
            panic!("not OAuth2");
        };
        assert_eq!(
            o.key,
            Some(OAuth2Key::Inline {
                client_id: "id".into(),
                secret: "s3cr3t".into()
            })
        );
        assert!(!format!("{:?}", Auth::OAuth2(o)).contains("s3cr3t"));

        for bad in [
            "authPlugin=oauth2\nauthParams=issuerUrl:x",
            "authPlugin=oauth2\nauthParams={\"type\":\"jwt_bearer\"}",
            "authPlugin=oauth2\nauthParams={\"privateKey\":\"data:application/json;base64,!!\"}",
        ] {
            assert!(
                matches!(
                    parse(bad),
                    Err(SettingsError::BadAuthParams {
                        plugin: "oauth2",
                        ..
                    })
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn the_tls_plugin_gives_the_client_certificate() {
        for params in [
            "tlsCertFile:/c.pem,tlsKeyFile:/k.pem",
            r#"{"tlsCertFile":"/c.pem","tlsKeyFile":"file:///k.pem"}"#,
        ] {
            let conf = format!(
                "authPlugin=org.apache.pulsar.client.impl.auth.AuthenticationTls\nauthParams={params}"
            );
            let s = parse(&conf).expect(params);
            assert_eq!(s.tls_cert, Some(PathBuf::from("/c.pem")), "{params}");
            assert_eq!(s.tls_key, Some(PathBuf::from("/k.pem")), "{params}");
            assert!(s.auth.is_none());
        }
    }

    #[test]
    fn java_properties_syntax() {
        let p = properties(
            "  # comment\n! also\na = 1\nb:2\nc 3\nd=x\\\n    y\ne=tab\\there\\u0041\nf\\=g=h\nnovalue\na=later\n",
        );
        assert_eq!(p["a"], "later");
        assert_eq!(p["b"], "2");
        assert_eq!(p["c"], "3");
        assert_eq!(p["d"], "xy");
        assert_eq!(p["e"], "tab\thereA");
        assert_eq!(p["f=g"], "h");
        assert_eq!(p["novalue"], "");
        assert!(!p.contains_key("#"));
    }
}
