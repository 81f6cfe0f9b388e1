//! The `pulsar-wire` command as a user runs it: the built binary, spawned
//! against the test broker, judged by its JSON lines, stderr and exit code.
//! One binary (feature `cli`), so it links once.

#[path = "../common/mod.rs"]
mod common;

mod demo;
mod failures;
mod letters;
mod nack_passes;
mod perf;
mod round_trip;
mod schema;
mod secured;
mod tls;

use std::process::Stdio;

/// What one run of the binary left behind.
#[derive(Debug)]
pub struct Run {
    /// The exit code (`None` if a signal ended it).
    pub code: Option<i32>,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Run {
    /// Every stdout line parsed as JSON (the test fails on any other line).
    pub fn json_lines(&self) -> Vec<serde_json::Value> {
        self.stdout
            .lines()
            .map(|l| {
                serde_json::from_str(l)
                    .unwrap_or_else(|e| panic!("not JSON ({e}): {l:?}\n{self:?}"))
            })
            .collect()
    }

    /// Asserts exit code 0 and returns the JSON lines.
    pub fn ok_lines(&self) -> Vec<serde_json::Value> {
        assert_eq!(self.code, Some(0), "expected success: {self:#?}");
        self.json_lines()
    }
}

/// Runs `pulsar-wire --url URL ARGS...` to its end (killed by the hang
/// guard if it never ends).
pub async fn pulsar_wire(url: &str, args: &[&str]) -> Run {
    let mut all = vec!["--url", url];
    all.extend_from_slice(args);
    run_raw(&all).await
}

/// Runs `pulsar-wire ARGS...` without adding `--url`.
pub async fn run_raw(args: &[&str]) -> Run {
    finish(spawn(args)).await
}

/// Starts `pulsar-wire ARGS...` (killed if dropped).
pub fn spawn(args: &[&str]) -> tokio::process::Child {
    spawn_with_env(args, &[])
}

/// Runs `pulsar-wire ARGS...` with `env` set, to its end.
pub async fn run_with_env(args: &[&str], env: &[(&str, &str)]) -> Run {
    finish(spawn_with_env(args, env)).await
}

/// Starts `pulsar-wire ARGS...` with `env` set and no client.conf from the
/// caller's environment (killed if dropped).
pub fn spawn_with_env(args: &[&str], env: &[(&str, &str)]) -> tokio::process::Child {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_pulsar-wire"))
        .args(args)
        .env_remove("PULSAR_CLIENT_CONF")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn pulsar-wire")
}

/// Sends SIGINT (Ctrl-C) to a running `pulsar-wire`.
pub fn interrupt(child: &tokio::process::Child) {
    let pid = child.id().expect("still running") as libc::pid_t;
    // SAFETY: kill(2) with a pid we spawned and still own (not yet reaped).
    assert_eq!(
        unsafe { libc::kill(pid, libc::SIGINT) },
        0,
        "kill -INT {pid}"
    );
}

/// Waits for a spawned run to end (under the hang guard).
pub async fn finish(child: tokio::process::Child) -> Run {
    let out = common::guard("pulsar-wire run", child.wait_with_output())
        .await
        .expect("wait for pulsar-wire");
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}
