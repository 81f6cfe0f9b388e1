//! Bad input and unreachable brokers: one line on stderr, a non-zero exit,
//! nothing on stdout.

use crate::common::broker::{BrokerKind, TestBroker, skip_unless};
use crate::common::unique_topic;
use crate::{Run, pulsar_wire, run_raw};

/// Asserts a failed run: `code`, no stdout, one `pulsar-wire: error:` line
/// (or clap's usage text for code 2) mentioning `needle`.
pub(crate) fn assert_failed(run: &Run, code: i32, needle: &str) {
    assert_eq!(run.code, Some(code), "{run:#?}");
    assert!(run.stdout.is_empty(), "{run:#?}");
    assert!(
        run.stderr.contains(needle),
        "expected {needle:?} in {run:#?}"
    );
    if code == 1 {
        let lines: Vec<&str> = run.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{run:#?}");
        assert!(lines[0].starts_with("pulsar-wire: error: "), "{run:#?}");
    }
}

#[tokio::test]
async fn a_url_with_another_scheme_is_refused() {
    let run = pulsar_wire("http://127.0.0.1:8080", &["produce", "t", "-m", "x"]).await;
    assert_failed(&run, 1, "scheme \"http\"");
    let run = pulsar_wire("pulsar://", &["consume", "t", "-s", "s", "-n", "1"]).await;
    assert_failed(&run, 1, "invalid URL");
}

#[tokio::test]
async fn a_log_filter_that_does_not_parse_is_refused() {
    let env = [("PULSAR_WIRE_LOG", "pulsar_wire=loudest")];
    let run = crate::run_with_env(&["produce", "t", "-m", "x"], &env).await;
    assert_failed(&run, 1, "PULSAR_WIRE_LOG=\"pulsar_wire=loudest\"");
}

#[tokio::test]
async fn an_unreachable_broker_fails_with_the_address() {
    // A loopback port nobody listens on: free, and reserved so that no
    // other test of this process is given it.
    let port = crate::common::broker::reserve_addr().port();
    let url = format!("pulsar://127.0.0.1:{port}");
    for args in [
        &["produce", "t", "-m", "x"][..],
        &["consume", "t", "-s", "s", "-n", "1"][..],
        &["perf", "produce", "t", "-n", "1"][..],
    ] {
        let run = pulsar_wire(&url, args).await;
        assert_failed(&run, 1, &format!("127.0.0.1:{port}"));
    }
}

#[tokio::test]
async fn subscription_types_are_taken_as_the_official_tools_spell_them() {
    // Accepted, so the run goes on to the (unreachable) broker: exit 1,
    // not a usage error.
    let port = crate::common::broker::reserve_addr().port();
    let url = format!("pulsar://127.0.0.1:{port}");
    for (flag, kind) in [
        ("-t", "Shared"),
        ("-t", "Key_Shared"),
        ("-t", "KEY_SHARED"),
        ("-t", "key-shared"),
        ("--subscription-type", "Failover"),
        ("--type", "exclusive"),
    ] {
        let run = pulsar_wire(&url, &["consume", "t", "-s", "s", "-n", "1", flag, kind]).await;
        assert_failed(&run, 1, &format!("127.0.0.1:{port}"));
    }
}

#[tokio::test]
async fn the_official_tools_flags_are_taken_where_they_mean_the_same() {
    // Accepted, so the run goes on to the (unreachable) broker: exit 1,
    // not a usage error.
    let port = crate::common::broker::reserve_addr().port();
    let url = format!("pulsar://127.0.0.1:{port}");
    for args in [
        &["produce", "t", "-m", "x", "--num-produce", "2", "-k", "key"][..],
        &["produce", "t", "-m", "x", "--properties", "a=b", "-c"][..],
        &[
            "consume",
            "t",
            "--subscription-name",
            "s",
            "--num-messages",
            "1",
        ][..],
        &[
            "consume", "t", "-s", "s", "-n", "1", "-p", "Earliest", "-q", "10",
        ][..],
        &[
            "consume",
            "t",
            "-s",
            "s",
            "-n",
            "1",
            "--subscription-position",
            "latest",
        ][..],
        &["consume", "t", "-s", "s", "-n", "1", "--queue-size", "10"][..],
    ] {
        let run = pulsar_wire(&url, args).await;
        assert_failed(&run, 1, &format!("127.0.0.1:{port}"));
    }
}

#[tokio::test]
async fn bad_arguments_are_usage_errors_with_exit_code_2() {
    for (args, needle) in [
        (&["produce", "t", "--compression", "brotli"][..], "brotli"),
        (&["consume", "t"][..], "--subscription"),
        (
            &["consume", "t", "-s", "s", "-t", "round-robin"][..],
            "round-robin",
        ),
        (
            &["consume", "t", "-s", "s", "--outcome", "maybe"][..],
            "maybe",
        ),
        (&["consume", "t", "-s", "s", "-n", "0"][..], "0 is not in"),
        (&["produce", "t", "-p", "no-equals"][..], "KEY=VALUE"),
        (&["perf", "produce", "t", "--rate", "-5"][..], "-5"),
        (&["frobnicate"][..], "frobnicate"),
    ] {
        let run = run_raw(args).await;
        assert_failed(&run, 2, needle);
    }
}

#[tokio::test]
async fn arguments_only_the_run_can_check_fail_with_exit_code_1() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let url = broker.service_url();
    let topic = unique_topic("cli-bad");
    let run = pulsar_wire(&url, &["produce", &topic, "--base64", "-m", "not base64!"]).await;
    assert_failed(&run, 1, "not base64");
    let run = pulsar_wire(&url, &["produce", "nope://a/b/c", "-m", "x"]).await;
    assert_failed(&run, 1, "nope://a/b/c");
    let run = pulsar_wire(&url, &["perf", "consume", &topic, "--duration=-1"]).await;
    assert_failed(&run, 1, "--duration");
    let missing = "/nonexistent/pulsar-wire-payload";
    let run = pulsar_wire(&url, &["produce", &topic, "-f", missing]).await;
    assert_failed(&run, 1, missing);
}

#[tokio::test]
async fn a_broker_error_fails_the_command() {
    if skip_unless(
        BrokerKind::Apache,
        "pulsar-lite accepts topics in any tenant; Apache refuses an unknown one",
    ) {
        return;
    }
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let url = broker.service_url();
    let topic = format!("persistent://no-such-tenant-{}/ns/t", std::process::id());
    let run = pulsar_wire(&url, &["produce", &topic, "-m", "x"]).await;
    assert_failed(&run, 1, "no-such-tenant");
}

#[tokio::test]
async fn a_negative_rate_and_files_beside_messages_are_refused() {
    let run = run_raw(&["produce", "t", "-m", "x", "--rate=-1"]).await;
    assert_failed(&run, 2, "messages a second");
    let run = run_raw(&["consume", "t", "-s", "s", "--rate", "fast"]).await;
    assert_failed(&run, 2, "messages a second");
    let run = run_raw(&["produce", "t", "-m", "x", "-f", "/tmp/a"]).await;
    assert_failed(&run, 2, "cannot be used with");
    let run = run_raw(&["perf", "produce", "t", "--access-mode", "solo"]).await;
    assert_failed(&run, 2, "solo");
}
