//! Pure: where an issuer URL leads, and whether a request may go there in
//! plain http.
//!
//! The rule: `https://` anywhere. Plain `http://` only to loopback
//! (127.0.0.0/8, `::1`, `localhost`), and a token endpoint never weaker
//! than its issuer (an `https://` issuer's discovery document naming an
//! `http://` token endpoint is refused, on loopback too). An explicit
//! [`PlainHttp::Anywhere`] lifts both.

use std::net::IpAddr;

use super::OAuth2Error;
use crate::client::BrokerAddress;

/// Where plain `http://` may carry requests to the issuer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum PlainHttp {
    /// To loopback only, and never to a token endpoint of an `https://` issuer.
    #[default]
    LoopbackOnly,
    /// Anywhere: the user accepted that the secret may travel unencrypted.
    Anywhere,
}

/// Where a URL leads.
#[derive(Debug)]
pub(crate) struct Target {
    pub(crate) address: BrokerAddress,
    pub(crate) host_header: String,
    pub(crate) path: String,
}

impl Target {
    /// Parses an `http://` or `https://` URL.
    pub(crate) fn parse(url: &str) -> Result<Self, OAuth2Error> {
        let uri: http::Uri = url.parse().map_err(|_| bad_url(url, "is not a URL"))?;
        let tls = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => return Err(bad_url(url, "is neither http:// nor https://")),
        };
        let host = uri.host().ok_or_else(|| bad_url(url, "names no host"))?;
        let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let address = BrokerAddress::new(host, port).with_tls(tls);
        Ok(Self {
            host_header: match uri.port_u16() {
                Some(_) => address.to_string(),
                None => address.host().to_owned(),
            },
            path: uri
                .path_and_query()
                .map_or("/", http::uri::PathAndQuery::as_str)
                .to_owned(),
            address,
        })
    }

    /// Whether requests to this URL travel in TLS.
    pub(crate) fn is_tls(&self) -> bool {
        self.address.is_tls()
    }

    /// Refuses `url` (this target) if it is plain http to a host off
    /// loopback and `plain` does not allow that.
    pub(crate) fn check_plain_http(&self, url: &str, plain: PlainHttp) -> Result<(), OAuth2Error> {
        let refused =
            !self.is_tls() && !is_loopback(self.address.host()) && plain != PlainHttp::Anywhere;
        match refused {
            true => Err(OAuth2Error::PlaintextRefused {
                url: url.to_owned(),
            }),
            false => Ok(()),
        }
    }
}

/// Checks the `token_endpoint` that the issuer at `issuer_url` named:
/// a URL, never plain http for an `https://` issuer, and plain http
/// elsewhere only as [`Target::check_plain_http`] allows.
pub(crate) fn check_token_endpoint(
    issuer_url: &str,
    token_endpoint: &str,
    plain: PlainHttp,
) -> Result<(), OAuth2Error> {
    let issuer = Target::parse(issuer_url)?;
    let endpoint = Target::parse(token_endpoint)?;
    if issuer.is_tls() && !endpoint.is_tls() && plain != PlainHttp::Anywhere {
        return Err(OAuth2Error::DowngradeRefused {
            issuer: issuer_url.to_owned(),
            token_endpoint: token_endpoint.to_owned(),
        });
    }
    endpoint.check_plain_http(token_endpoint, plain)
}

/// Whether `host` (a name or an address, without brackets) is this
/// machine: `localhost`, 127.0.0.0/8 or `::1` (also as `::ffff:127.x.y.z`).
pub(crate) fn is_loopback(host: &str) -> bool {
    let host = host.strip_suffix('.').unwrap_or(host);
    if host.eq_ignore_ascii_case("localhost") {
        return true;
    }
    host.parse::<IpAddr>()
        .is_ok_and(|ip| ip.to_canonical().is_loopback())
}

fn bad_url(url: &str, problem: &'static str) -> OAuth2Error {
    OAuth2Error::Url {
        url: url.to_owned(),
        problem,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(url: &str) -> (String, bool, String, String) {
        let t = Target::parse(url).expect(url);
        (
            t.address.to_string(),
            t.address.is_tls(),
            t.host_header,
            t.path,
        )
    }

    #[test]
    fn urls_become_an_address_a_host_header_and_a_path() {
        assert_eq!(
            target("https://auth.example.com/oauth/token?x=1"),
            (
                "auth.example.com:443".into(),
                true,
                "auth.example.com".into(),
                "/oauth/token?x=1".into()
            )
        );
        assert_eq!(
            target("http://127.0.0.1:8080"),
            (
                "127.0.0.1:8080".into(),
                false,
                "127.0.0.1:8080".into(),
                "/".into()
            )
        );
        assert_eq!(target("http://[::1]:9/t").0, "[::1]:9");
        for bad in ["ftp://x/", "not a url", "/relative"] {
            assert!(
                matches!(Target::parse(bad), Err(OAuth2Error::Url { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn loopback_is_localhost_127_slash_8_and_ipv6_one() {
        for host in [
            "localhost",
            "LocalHost",
            "localhost.",
            "127.0.0.1",
            "127.0.0.2",
            "127.255.255.254",
            "::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(is_loopback(host), "{host}");
        }
        for host in [
            "auth.internal",
            "localhost.example.com",
            "mylocalhost",
            "128.0.0.1",
            "10.0.0.1",
            "0.0.0.0",
            "::",
            "::2",
            "::ffff:10.0.0.1",
            "",
        ] {
            assert!(!is_loopback(host), "{host}");
        }
    }

    /// Whether a request to `url` passes the plain-http rule.
    fn request_allowed(url: &str, plain: PlainHttp) -> bool {
        let target = Target::parse(url).expect(url);
        match target.check_plain_http(url, plain) {
            Ok(()) => true,
            Err(OAuth2Error::PlaintextRefused { url: refused }) => {
                assert_eq!(refused, url);
                false
            }
            Err(other) => panic!("{url}: {other:?}"),
        }
    }

    #[test]
    fn plain_http_reaches_loopback_only_unless_allowed_anywhere() {
        use PlainHttp::{Anywhere, LoopbackOnly};
        for (url, loopback_only) in [
            ("https://auth.example.com/", true),
            ("https://127.0.0.1/", true),
            ("http://127.0.0.1:8080/", true),
            ("http://127.0.0.2/token", true),
            ("http://localhost/", true),
            ("http://[::1]:9/t", true),
            ("http://auth.example.com/", false),
            ("http://10.0.0.1/", false),
            ("http://[::2]/", false),
        ] {
            assert_eq!(request_allowed(url, LoopbackOnly), loopback_only, "{url}");
            assert!(request_allowed(url, Anywhere), "{url} allowed anywhere");
        }
    }

    #[test]
    fn a_token_endpoint_is_never_weaker_than_its_issuer_unless_allowed() {
        use PlainHttp::{Anywhere, LoopbackOnly};
        let https = "https://auth.example.com/";
        let ok = |issuer, endpoint, plain| check_token_endpoint(issuer, endpoint, plain).is_ok();

        assert!(ok(https, "https://auth.example.com/token", LoopbackOnly));
        assert!(ok(https, "https://other.example.com/token", LoopbackOnly));
        for endpoint in ["http://127.0.0.2/token", "http://auth.example.com/token"] {
            assert!(
                matches!(
                    check_token_endpoint(https, endpoint, LoopbackOnly),
                    Err(OAuth2Error::DowngradeRefused { issuer, token_endpoint })
                        if issuer == https && token_endpoint == endpoint
                ),
                "{endpoint}"
            );
            assert!(ok(https, endpoint, Anywhere), "{endpoint} allowed anywhere");
        }

        let loopback = "http://127.0.0.1:8080";
        assert!(ok(loopback, "http://127.0.0.1:8080/token", LoopbackOnly));
        assert!(ok(loopback, "https://auth.example.com/token", LoopbackOnly));
        assert!(matches!(
            check_token_endpoint(loopback, "http://auth.internal/token", LoopbackOnly),
            Err(OAuth2Error::PlaintextRefused { url }) if url == "http://auth.internal/token"
        ));
        assert!(ok(loopback, "http://auth.internal/token", Anywhere));

        assert!(matches!(
            check_token_endpoint(https, "token", LoopbackOnly),
            Err(OAuth2Error::Url { .. })
        ));
    }
}
