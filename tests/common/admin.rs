//! The few Apache Pulsar admin (REST) calls the tests need, over a plain
//! HTTP/1.1 request: no HTTP client dependency for a handful of calls.
//!
//! On a cluster a broker answers an admin call about a bundle it does not
//! own (or one only the leader may make) with a redirect; [`call`] follows
//! up to [`MAX_REDIRECTS`] of them, as `pulsar-admin` does.

use std::time::Duration;

use pulsar_wire::MessageId;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Redirects one admin call follows.
pub const MAX_REDIRECTS: usize = 5;

/// An admin answer: HTTP status and body.
#[derive(Debug)]
pub struct Answer {
    /// The HTTP status code.
    pub status: u16,
    /// The body (chunked transfer decoded).
    pub body: String,
}

impl Answer {
    /// The body as JSON; panics with the body if it is not.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("admin answer is not JSON ({e}): {}", self.body))
    }

    /// Panics unless the status is 2xx.
    pub fn ok(self, what: &str) -> Self {
        assert!(
            (200..300).contains(&self.status),
            "{what}: HTTP {} {}",
            self.status,
            self.body
        );
        self
    }
}

/// `METHOD url` with an optional JSON body, following redirects; panics
/// if the admin API cannot be reached.
pub async fn call(method: &str, url: &str, body: Option<&str>) -> Answer {
    try_call(method, url, body)
        .await
        .unwrap_or_else(|e| panic!("{method} {url}: {e}"))
}

/// [`call`] that returns an unreachable broker or a broken answer as an
/// error (for callers that expect brokers to die under them).
pub async fn try_call(method: &str, url: &str, body: Option<&str>) -> Result<Answer, String> {
    let mut url = url.to_owned();
    for _ in 0..=MAX_REDIRECTS {
        let (status, headers, body_text) = once(method, &url, body).await?;
        if matches!(status, 301 | 302 | 303 | 307 | 308) {
            url = header(&headers, "location")
                .ok_or_else(|| format!("redirect without Location from {url}"))?
                .to_owned();
            continue;
        }
        return Ok(Answer {
            status,
            body: body_text,
        });
    }
    Err(format!("more than {MAX_REDIRECTS} redirects"))
}

/// One request on a fresh connection: (status, header lines, body).
async fn once(
    method: &str,
    url: &str,
    body: Option<&str>,
) -> Result<(u16, String, String), String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("admin URL {url:?} is not http://host:port/path"))?;
    let (host, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let body = body.unwrap_or("");
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nAccept: application/json\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let io = |e: std::io::Error| format!("admin API {host}: {e}");
    let mut socket = TcpStream::connect(host).await.map_err(io)?;
    socket.write_all(request.as_bytes()).await.map_err(io)?;
    let mut raw = Vec::new();
    socket.read_to_end(&mut raw).await.map_err(io)?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, payload) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("no HTTP header end in {text:?}"))?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("no status in {head:?}"))?;
    let chunked = header(head, "transfer-encoding").is_some_and(|v| v.contains("chunked"));
    let payload = if chunked {
        dechunk(payload)?
    } else {
        payload.to_owned()
    };
    Ok((status, head.to_owned(), payload))
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.trim()
            .eq_ignore_ascii_case(name)
            .then_some(value.trim())
    })
}

/// Decodes a chunked body: `<hex size>\r\n<data>\r\n` ... `0\r\n\r\n`.
fn dechunk(mut rest: &str) -> Result<String, String> {
    let mut out = String::new();
    while let Some((size_line, tail)) = rest.split_once("\r\n") {
        let size = usize::from_str_radix(size_line.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| format!("bad chunk size line {size_line:?}"))?;
        if size == 0 {
            break;
        }
        let chunk = tail
            .get(..size)
            .ok_or_else(|| format!("chunk of {size} bytes cut short"))?;
        out.push_str(chunk);
        rest = tail[size..].strip_prefix("\r\n").unwrap_or(&tail[size..]);
    }
    Ok(out)
}

/// `persistent://tenant/ns/name` → `persistent/tenant/ns/name` (REST paths).
pub fn rest_path(topic: &str) -> String {
    topic.replace("://", "/")
}

/// Creates `topic` (`persistent://tenant/ns/name`) with `partitions` partitions.
pub async fn create_partitioned_topic(admin_url: &str, topic: &str, partitions: u32) {
    let url = format!("{admin_url}/admin/v2/{}/partitions", rest_path(topic));
    call("PUT", &url, Some(&partitions.to_string()))
        .await
        .ok(&format!("creating {topic} with {partitions} partitions"));
}

/// Grows partitioned `topic` to `partitions` partitions.
pub async fn update_partitioned_topic(admin_url: &str, topic: &str, partitions: u32) {
    let url = format!("{admin_url}/admin/v2/{}/partitions", rest_path(topic));
    call("POST", &url, Some(&partitions.to_string()))
        .await
        .ok(&format!("growing {topic} to {partitions} partitions"));
}

/// Creates `topic` (not partitioned).
pub async fn create_topic(admin_url: &str, topic: &str) {
    let url = format!("{admin_url}/admin/v2/{}", rest_path(topic));
    call("PUT", &url, None)
        .await
        .ok(&format!("creating {topic}"));
}

/// Deletes `topic`, closing its producers and consumers (`force`).
pub async fn delete_topic(admin_url: &str, topic: &str) {
    let url = format!("{admin_url}/admin/v2/{}?force=true", rest_path(topic));
    call("DELETE", &url, None)
        .await
        .ok(&format!("deleting {topic}"));
}

/// Turns off creating topics on first use in `tenant/ns`: a deleted topic
/// stays deleted when a client looks it up again.
pub async fn disable_auto_topic_creation(admin_url: &str, namespace: &str) {
    let url = format!("{admin_url}/admin/v2/namespaces/{namespace}/autoTopicCreation");
    call("POST", &url, Some("{\"allowAutoTopicCreation\":false}"))
        .await
        .ok(&format!("turning off topic creation in {namespace}"));
}

/// Creates namespace `tenant/ns` with `bundles` bundles.
pub async fn create_namespace(admin_url: &str, namespace: &str, bundles: u32) {
    let url = format!("{admin_url}/admin/v2/namespaces/{namespace}");
    let body = format!("{{\"bundles\":{{\"numBundles\":{bundles}}}}}");
    call("PUT", &url, Some(&body))
        .await
        .ok(&format!("creating namespace {namespace}"));
}

/// The bundle ranges of `tenant/ns`, in order (`0x00000000_0x40000000`, ...).
pub async fn namespace_bundles(admin_url: &str, namespace: &str) -> Vec<String> {
    let url = format!("{admin_url}/admin/v2/namespaces/{namespace}/bundles");
    let answer = call("GET", &url, None).await.ok("namespace bundles").json();
    let bounds: Vec<&str> = answer["boundaries"]
        .as_array()
        .expect("boundaries")
        .iter()
        .map(|b| b.as_str().expect("a boundary"))
        .collect();
    bounds
        .windows(2)
        .map(|w| format!("{}_{}", w[0], w[1]))
        .collect()
}

/// The bundle range `topic` belongs to.
pub async fn topic_bundle(admin_url: &str, topic: &str) -> String {
    let url = format!("{admin_url}/lookup/v2/topic/{}/bundle", rest_path(topic));
    let answer = call("GET", &url, None).await.ok("topic bundle");
    answer.body.trim().trim_matches('"').to_owned()
}

/// The `pulsar://` URL of the broker that owns `topic` (a lookup: an unowned
/// bundle gets assigned by it).
///
/// A lookup made while the bundle passes from one broker to another can
/// fail with HTTP 500 "Failed to acquire ownership": the new owner found
/// the old one still holding it. It is asked again, with backoff, until
/// the old owner lets go or [`HANDOVER_DEADLINE`] has passed.
pub async fn topic_owner(admin_url: &str, topic: &str) -> String {
    let url = format!("{admin_url}/lookup/v2/topic/{}", rest_path(topic));
    let answer = call_until(&url, HANDOVER_DEADLINE, |answer| {
        !(answer.status == 500 && answer.body.contains("Failed to acquire ownership"))
    })
    .await
    .unwrap_or_else(|last| {
        panic!("lookup of {topic}: the bundle was still being handed over after {HANDOVER_DEADLINE:?}: {last:?}")
    });
    let answer = answer.ok("topic lookup").json();
    answer["brokerUrl"]
        .as_str()
        .unwrap_or_else(|| panic!("no brokerUrl in {answer}"))
        .to_owned()
}

/// How long a bundle handover may take on a loaded cluster before a lookup
/// gives up: a client's default operation timeout, which the tests use.
pub const HANDOVER_DEADLINE: Duration = Duration::from_secs(30);

/// First delay between two tries of an admin call that waits for a state
/// (doubling up to [`MAX_RETRY_DELAY`]).
const FIRST_RETRY_DELAY: Duration = Duration::from_millis(50);
const MAX_RETRY_DELAY: Duration = Duration::from_secs(1);

/// `GET url` until an answer satisfies `done`, with backoff; the last
/// answer as an error once `deadline` has passed since the first try.
async fn call_until(
    url: &str,
    deadline: Duration,
    done: impl Fn(&Answer) -> bool,
) -> Result<Answer, Answer> {
    let end = tokio::time::Instant::now() + deadline;
    let mut delay = FIRST_RETRY_DELAY;
    loop {
        let answer = call("GET", url, None).await;
        if done(&answer) {
            return Ok(answer);
        }
        if tokio::time::Instant::now() + delay >= end {
            return Err(answer);
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(MAX_RETRY_DELAY);
    }
}

/// `GET url` until `done` holds for the outcome (an answer, or the
/// broker unreachable), with backoff and no deadline: for a state the
/// broker reaches by itself; wrap it in a hang guard.
pub async fn poll_until(url: &str, done: impl Fn(Result<Answer, String>) -> bool) {
    let mut delay = FIRST_RETRY_DELAY;
    while !done(try_call("GET", url, None).await) {
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(MAX_RETRY_DELAY);
    }
}

/// Unloads `topic` alone: its broker closes it, and the next lookup loads it
/// again (on the same broker, which still owns the bundle).
pub async fn unload_topic(admin_url: &str, topic: &str) {
    let url = format!("{admin_url}/admin/v2/{}/unload", rest_path(topic));
    call("PUT", &url, None).await.ok("topic unload");
}

/// Resets `subscription`'s cursor on `topic` to `id` (its entry): the
/// broker closes the subscription's consumers, which subscribe again and
/// get everything from there.
pub async fn reset_cursor(admin_url: &str, topic: &str, subscription: &str, id: MessageId) {
    let url = format!(
        "{admin_url}/admin/v2/{}/subscription/{subscription}/resetcursor",
        rest_path(topic)
    );
    let body = format!(
        r#"{{"ledgerId":{},"entryId":{},"partitionIndex":-1}}"#,
        id.ledger_id, id.entry_id
    );
    call("POST", &url, Some(&body)).await.ok("reset cursor");
}

/// The entries of `topic` that `subscription` has not acked (the topic's
/// stats: `msgBacklog`).
pub async fn subscription_backlog(admin_url: &str, topic: &str, subscription: &str) -> u64 {
    let url = format!("{admin_url}/admin/v2/{}/stats", rest_path(topic));
    let stats = call("GET", &url, None).await.ok("topic stats").json();
    stats["subscriptions"][subscription]["msgBacklog"]
        .as_u64()
        .unwrap_or_else(|| panic!("no backlog of {subscription} in {stats}"))
}

/// Turns broker-side deduplication on for `topic`.
pub async fn enable_deduplication(admin_url: &str, topic: &str) {
    let url = format!(
        "{admin_url}/admin/v2/{}/deduplicationEnabled",
        rest_path(topic)
    );
    call("POST", &url, Some("true"))
        .await
        .ok(&format!("deduplication on {topic}"));
}

/// Unloads bundle `bundle` of `namespace`; with `destination` (a broker id,
/// `host:webport`) the leader assigns it there next.
pub async fn unload_bundle(
    admin_url: &str,
    namespace: &str,
    bundle: &str,
    destination: Option<&str>,
) {
    let query = destination
        .map(|d| format!("?destinationBroker={d}"))
        .unwrap_or_default();
    let url = format!("{admin_url}/admin/v2/namespaces/{namespace}/{bundle}/unload{query}");
    call("PUT", &url, None).await.ok("bundle unload");
}

/// Splits `bundle` of `namespace` in two (at its middle); the broker that
/// owned it owns both halves.
pub async fn split_bundle(admin_url: &str, namespace: &str, bundle: &str) {
    let url = format!("{admin_url}/admin/v2/namespaces/{namespace}/{bundle}/split?unload=false");
    call("PUT", &url, None).await.ok("bundle split");
}

/// The broker id (`host:webport`) of the load-manager leader.
pub async fn leader_broker(admin_url: &str) -> String {
    let url = format!("{admin_url}/admin/v2/brokers/leaderBroker");
    let answer = call("GET", &url, None).await.ok("leader broker").json();
    answer["brokerId"]
        .as_str()
        .or_else(|| answer["serviceUrl"].as_str())
        .unwrap_or_else(|| panic!("no brokerId in {answer}"))
        .trim_start_matches("http://")
        .to_owned()
}
