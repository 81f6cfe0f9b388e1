//! The few Apache Pulsar admin (REST) calls the tests need, over a plain
//! HTTP/1.1 request: no HTTP client dependency for two PUTs.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Creates `topic` (`persistent://tenant/ns/name`) with `partitions` partitions.
pub async fn create_partitioned_topic(admin_url: &str, topic: &str, partitions: u32) {
    let path = topic.replace("://", "/");
    let what = format!("creating {topic} with {partitions} partitions");
    put(
        admin_url,
        &format!("{path}/partitions"),
        &partitions.to_string(),
        &what,
    )
    .await;
}

/// Unloads `topic` (`persistent://tenant/ns/name`): the broker closes its
/// producers and consumers (CLOSE_PRODUCER / CLOSE_CONSUMER) and loads it
/// again when they come back.
pub async fn unload_topic(admin_url: &str, topic: &str) {
    let path = topic.replace("://", "/");
    put(
        admin_url,
        &format!("{path}/unload"),
        "",
        &format!("unloading {topic}"),
    )
    .await;
}

/// `PUT /admin/v2/{path}` with a JSON `body`; panics unless the answer is 2xx.
async fn put(admin_url: &str, path: &str, body: &str, what: &str) {
    let host = admin_url
        .strip_prefix("http://")
        .expect("admin URL is http://host:port");
    let request = format!(
        "PUT /admin/v2/{path} HTTP/1.1\r\nHost: {host}\r\n\
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
