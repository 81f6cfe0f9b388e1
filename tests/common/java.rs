//! The Java client of the broker's version as a peer: a single-file source
//! program under `tests/java/`, run on the broker's classpath
//! (`scripts/apache-pulsar classpath`).

use std::path::Path;

/// A `java` command that runs `tests/java/{program}.java` with `args`
/// (logging at warn), killed when dropped.
pub async fn peer(program: &str, args: &[&str]) -> tokio::process::Command {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let classpath = tokio::process::Command::new(root.join("scripts/apache-pulsar"))
        .arg("classpath")
        .output()
        .await
        .expect("run scripts/apache-pulsar classpath");
    assert!(classpath.status.success(), "no classpath: {classpath:?}");
    let classpath = String::from_utf8(classpath.stdout).expect("utf-8 classpath");
    let mut command = tokio::process::Command::new("java");
    command
        .args(["-XX:TieredStopAtLevel=1", "-Dlog4j2.level=warn", "-cp"])
        .arg(classpath.trim())
        .arg(root.join(format!("tests/java/{program}.java")))
        .args(args)
        .kill_on_drop(true);
    command
}
