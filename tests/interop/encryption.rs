//! Encrypted messages from the official client (PyPI `pulsar-client`) are
//! never deleted by a pulsar-wire consumer without the key: by default each
//! one is an `Unreadable` error naming it, nothing is acked, the plain
//! messages around them keep flowing, and afterwards the official client
//! with the private key reads every encrypted message from the same
//! subscription. `Consume` hands the ciphertext out with its keys.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use pulsar_wire::MessageId;
use pulsar_wire::consumer::{ConsumerBuilder, ConsumerError, CryptoFailureAction, Unreadable};
use serde_json::Value;

use crate::common::broker::TestBroker;
use crate::common::broker::client;
use crate::common::{guard, init_tracing, unique_topic};
use crate::consume::shared_consumer;
use crate::produce::python;

const ENCRYPTED: usize = 10;
const PLAIN: usize = 5;

/// Sends `secret-<i>` encrypted with key `wire-test` and `plain-<i>`
/// unencrypted, interleaved, unbatched.
const PRODUCE: &str = r#"
import json, sys, pulsar
url, topic, public, private = sys.argv[1:5]
client = pulsar.Client(url)
keys = pulsar.CryptoKeyReader(public, private)
secret = client.create_producer(topic, encryption_key="wire-test", crypto_key_reader=keys)
plain = client.create_producer(topic)
for i in range(int(sys.argv[5])):
    secret.send(("secret-%d" % i).encode())
    if i < int(sys.argv[6]):
        plain.send(("plain-%d" % i).encode())
print(json.dumps({"sent": True}), flush=True)
client.close()
"#;

/// Sends a plain `end` marker, then reads subscription `argv[3]` with the
/// private key up to it, printing each payload.
const READ_WITH_KEY: &str = r#"
import json, sys, pulsar
url, topic, subscription, public, private = sys.argv[1:6]
client = pulsar.Client(url)
keys = pulsar.CryptoKeyReader(public, private)
consumer = client.subscribe(topic, subscription, consumer_type=pulsar.ConsumerType.Shared,
                            crypto_key_reader=keys)
client.create_producer(topic).send(b"end")
while True:
    m = consumer.receive(timeout_millis=30000)
    consumer.acknowledge(m)
    if m.data() == b"end":
        break
    print(json.dumps({"data": m.data().decode()}), flush=True)
client.close()
"#;

/// An RSA key pair in PEM files, made with `openssl`; removed on drop.
struct KeyPair {
    dir: PathBuf,
}

impl KeyPair {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("pulsar-wire-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("key dir");
        let pair = Self { dir };
        let run = |args: &[&str]| {
            let out = std::process::Command::new("openssl")
                .args(args)
                .current_dir(&pair.dir)
                .output()
                .expect("run openssl");
            assert!(out.status.success(), "openssl {args:?}: {out:?}");
        };
        run(&["genrsa", "-out", "private.pem", "2048"]);
        run(&["rsa", "-in", "private.pem", "-pubout", "-out", "public.pem"]);
        pair
    }

    fn public(&self) -> String {
        path_text(&self.dir.join("public.pem"))
    }

    fn private(&self) -> String {
        path_text(&self.dir.join("private.pem"))
    }
}

impl Drop for KeyPair {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn path_text(path: &Path) -> String {
    path.to_str().expect("utf-8 temp path").to_owned()
}

#[tokio::test]
async fn encrypted_messages_stay_for_a_consumer_with_the_key() {
    init_tracing();
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let topic = unique_topic("interop-encrypted");
    let keys = KeyPair::new("encryption");
    guard("encrypted messages", async {
        let client = client(&broker).await;
        let mut keyless = shared_consumer(&client, &topic, "keyless", |b| b).await;
        let consume = |b: ConsumerBuilder| b.crypto_failure_action(CryptoFailureAction::Consume);
        let mut raw = shared_consumer(&client, &topic, "raw", consume).await;
        let counts = [ENCRYPTED.to_string(), PLAIN.to_string()];
        let url = broker.service_url();
        let args = [url.clone(), topic.clone(), keys.public(), keys.private()];
        python(PRODUCE, &[&args[..], &counts[..]].concat()).await;

        // Without the key: an error naming each encrypted message, the
        // plain ones delivered (and acked) in between.
        let mut unreadable = BTreeSet::<MessageId>::new();
        let mut plain = BTreeSet::new();
        while unreadable.len() + plain.len() < ENCRYPTED + PLAIN {
            match keyless.receive().await {
                Ok(m) => {
                    keyless.ack(&m).await.expect("ack");
                    plain.insert(String::from_utf8(m.payload().to_vec()).expect("utf-8"));
                }
                Err(ConsumerError::Unreadable { id, reason, .. }) => {
                    assert_eq!(reason, Unreadable::Encrypted);
                    assert!(unreadable.insert(id), "{id} reported twice");
                }
                Err(e) => panic!("receive: {e}"),
            }
        }
        let expected: BTreeSet<_> = (0..PLAIN).map(|i| format!("plain-{i}")).collect();
        assert_eq!(plain, expected);
        keyless.close().await.expect("close");

        // `Consume`: the ciphertext with the key's name.
        for _ in 0..ENCRYPTED + PLAIN {
            let m = raw.receive().await.expect("receive");
            if let Some(context) = m.encryption_context() {
                assert_eq!(context.keys()[0].name, "wire-test");
                assert!(!m.payload().starts_with(b"secret-"), "not ciphertext");
            } else {
                assert!(m.payload().starts_with(b"plain-"));
            }
            raw.ack(&m).await.expect("ack");
        }
        raw.close().await.expect("close");

        // With the key: every encrypted message is still there, and nothing
        // acked comes back.
        let read_args = [
            url,
            topic.clone(),
            "keyless".into(),
            keys.public(),
            keys.private(),
        ];
        let read: Vec<String> = python(READ_WITH_KEY, &read_args)
            .await
            .iter()
            .map(|v: &Value| v["data"].as_str().expect("data").to_owned())
            .collect();
        let mut expected: Vec<_> = (0..ENCRYPTED).map(|i| format!("secret-{i}")).collect();
        let mut got = read.clone();
        got.sort();
        expected.sort();
        assert_eq!(got, expected, "read with the key: {read:?}");
    })
    .await;
}
