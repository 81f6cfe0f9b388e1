//! The few Apache Pulsar admin (REST) calls the tests need, over a plain
//! HTTP/1.1 request: no HTTP client dependency for a few calls.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// `{method} {admin_url}/admin/v2/{path}` with a JSON `body`; panics
/// (failing the test) unless the answer is 2xx, naming `what`.
async fn call(admin_url: &str, method: &str, path: &str, body: &str, what: &str) {
    let host = admin_url
        .strip_prefix("http://")
        .expect("admin URL is http://host:port");
    let request = format!(
        "{method} /admin/v2/{path} HTTP/1.1\r\nHost: {host}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut socket = TcpStream::connect(host).await.expect("admin API reachable");
    socket
        .write_all(request.as_bytes())
        .await
        .expect("admin request");
    let mut answer = String::new();
    socket
        .read_to_string(&mut answer)
        .await
        .expect("admin answer");
    let status = answer.split_whitespace().nth(1).unwrap_or("");
    assert!(status.starts_with('2'), "{what}: {answer}");
}

/// Creates `topic` (`persistent://tenant/ns/name`) with `partitions` partitions.
pub async fn create_partitioned_topic(admin_url: &str, topic: &str, partitions: u32) {
    let path = format!("{}/partitions", topic.replace("://", "/"));
    let what = format!("creating {topic} with {partitions} partitions");
    call(admin_url, "PUT", &path, &partitions.to_string(), &what).await;
}

/// Unloads `topic`: the broker closes its producers and consumers, which
/// connect again (the topic is loaded anew).
pub async fn unload_topic(admin_url: &str, topic: &str) {
    let path = format!("{}/unload", topic.replace("://", "/"));
    call(admin_url, "PUT", &path, "", &format!("unloading {topic}")).await;
}

/// Turns broker-side deduplication on for `topic`.
pub async fn enable_deduplication(admin_url: &str, topic: &str) {
    let path = format!("{}/deduplicationEnabled", topic.replace("://", "/"));
    let what = format!("deduplication on {topic}");
    call(admin_url, "POST", &path, "true", &what).await;
}
