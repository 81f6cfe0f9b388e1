//! The embedded broker `demo` starts when no `--url` is given: pulsar-lite
//! (PyPI), found as the test harness finds it (`PULSAR_LITE_BIN`, the
//! project's `.venv` made by `scripts/setup`, then `PATH`), on a free
//! loopback port with a fresh temp dir. Dropping it kills the process and
//! removes the dir.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// Why the embedded broker did not start.
#[derive(Debug, thiserror::Error)]
pub(crate) enum EmbeddedError {
    /// No pulsar-lite binary anywhere we look.
    #[error(
        "pulsar-lite not found: run scripts/setup (it installs it into .venv), set PULSAR_LITE_BIN, or pass --url"
    )]
    NotFound,
    /// The file system or the process refused.
    #[error("cannot start pulsar-lite ({what}): {source}")]
    Io {
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// It ran but never said it was listening.
    #[error("pulsar-lite did not report \"Server listening\" within {0:?}")]
    NotReady(Duration),
}

/// A pulsar-lite process owned by this command.
#[derive(Debug)]
pub(crate) struct EmbeddedBroker {
    addr: SocketAddr,
    child: Child,
    dir: PathBuf,
}

impl EmbeddedBroker {
    /// Starts pulsar-lite and waits until it accepts connections.
    pub(crate) fn start() -> Result<Self, EmbeddedError> {
        let bin = find_binary().ok_or(EmbeddedError::NotFound)?;
        let io = |what| move |source| EmbeddedError::Io { what, source };
        let dir = std::env::temp_dir().join(format!("pulsar-wire-demo-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(io("temp dir"))?;
        let addr = free_addr().map_err(io("free port"))?;
        let metrics = free_addr().map_err(io("free port"))?;
        let config = dir.join("broker.toml");
        std::fs::write(
            &config,
            format!("[metrics]\nenabled = true\naddr = \"{metrics}\"\n"),
        )
        .map_err(io("config"))?;
        let mut child = Command::new(&bin)
            .arg("--addr")
            .arg(addr.to_string())
            .arg("--db-path")
            .arg(dir.join("db"))
            .arg("--config")
            .arg(&config)
            .arg("--log-level")
            .arg("info")
            .current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(io("spawn"))?;
        let stderr = child.stderr.take().expect("stderr is piped");
        let broker = Self { addr, child, dir };
        // A thread reads the broker's log until its "listening" line, then
        // keeps draining it so the broker never blocks on a full pipe.
        let (ready_tx, ready_rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.contains("Server listening on") {
                    let _ = ready_tx.send(());
                }
            }
        });
        let wait = Duration::from_secs(30);
        ready_rx
            .recv_timeout(wait)
            .map_err(|_| EmbeddedError::NotReady(wait))?;
        Ok(broker)
    }

    /// `pulsar://127.0.0.1:PORT`.
    pub(crate) fn service_url(&self) -> String {
        format!("pulsar://{}", self.addr)
    }
}

impl Drop for EmbeddedBroker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn find_binary() -> Option<PathBuf> {
    if let Some(bin) = std::env::var_os("PULSAR_LITE_BIN") {
        return Some(PathBuf::from(bin));
    }
    let venv_lib = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/lib");
    let in_venv = std::fs::read_dir(venv_lib).ok().and_then(|entries| {
        entries
            .flatten()
            .map(|e| e.path().join("site-packages/pulsar_lite/bin/pulsar-lite"))
            .find(|bin| bin.is_file())
    });
    in_venv.or_else(|| {
        let path = std::env::var_os("PATH")?;
        std::env::split_paths(&path)
            .map(|dir| dir.join("pulsar-lite"))
            .find(|bin| bin.is_file())
    })
}

fn free_addr() -> std::io::Result<SocketAddr> {
    TcpListener::bind("127.0.0.1:0")?.local_addr()
}
