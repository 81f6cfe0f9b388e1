//! CONNECT → CONNECTED: the first exchange on every connection.
//!
//! The client sends CONNECT (client version, protocol v21, feature flags,
//! optional credentials and proxy target) and waits, within the operation
//! timeout, for CONNECTED. Credentials come fresh from the configured
//! [`Authentication`](crate::auth::Authentication), for CONNECT and again
//! for each AUTH_CHALLENGE on the way. CONNECTED's `max_message_size` (5 MiB when
//! absent, as pulsar-lite sends it) becomes the connection's frame limit.

use bytes::BytesMut;
use futures::StreamExt;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio_util::codec::FramedRead;
use tracing::debug;

use super::{ConnectionError, ConnectionOptions};
use crate::auth::{self, AuthFailure};
use crate::clock;
use crate::codec::PulsarCodec;
use crate::proto::BaseCommand;
use crate::proto::ServerError;
use crate::proto::base_command::Type;
use crate::wire::{self, commands, commands::AuthPayload};

/// What CONNECTED told us.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Connected {
    pub(crate) server_version: String,
    pub(crate) protocol_version: i32,
    /// The largest message the broker accepts.
    pub(crate) max_message_size: usize,
    /// Whether the broker takes WATCH_TOPIC_LIST (its feature flags say so).
    pub(crate) supports_topic_watchers: bool,
}

/// The meaning of one frame received while waiting for CONNECTED.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Answer {
    Connected(Connected),
    Challenge,
}

/// Pure: interprets the broker's answer to CONNECT.
pub(crate) fn interpret(command: BaseCommand) -> Result<Answer, ConnectionError> {
    match command {
        BaseCommand {
            connected: Some(c), ..
        } => Ok(Answer::Connected(Connected {
            max_message_size: c
                .max_message_size
                .and_then(|n| usize::try_from(n).ok())
                .filter(|&n| n > 0)
                .unwrap_or(wire::DEFAULT_MAX_MESSAGE_SIZE),
            protocol_version: c.protocol_version.unwrap_or(0),
            supports_topic_watchers: c
                .feature_flags
                .as_ref()
                .and_then(|f| f.supports_topic_watchers)
                .unwrap_or(false),
            server_version: c.server_version,
        })),
        BaseCommand { error: Some(e), .. } => Err(ConnectionError::Server {
            op: "CONNECT",
            code: e.error(),
            message: e.message,
        }),
        BaseCommand {
            auth_challenge: Some(_),
            ..
        } => Ok(Answer::Challenge),
        other => Err(ConnectionError::UnexpectedResponse {
            op: "CONNECT",
            got: other.r#type().as_str_name(),
        }),
    }
}

/// Pure: turns the broker's refusal of `sent` (AuthenticationError) into
/// [`ConnectionError::AuthenticationRefused`], telling an expired token (its
/// `exp` at or before `now_unix_millis`) from other refusals.
pub(crate) fn refusal(
    sent: Option<&AuthPayload>,
    message: String,
    now_unix_millis: u64,
) -> ConnectionError {
    let expired = sent
        .and_then(|s| auth::jwt::expiry(&s.data))
        .is_some_and(|exp| exp.saturating_mul(1000) <= now_unix_millis);
    ConnectionError::AuthenticationRefused {
        method: sent.map_or("none", |s| s.method.as_str()).into(),
        failure: if expired {
            AuthFailure::Expired
        } else {
            AuthFailure::Rejected
        },
        message,
    }
}

/// The credentials to answer AUTH_CHALLENGE with: the configured ones, or
/// the `none` method the Java client sends when authentication is off.
pub(crate) fn challenge_answer(auth: Option<&AuthPayload>) -> BaseCommand {
    let none = AuthPayload {
        method: "none".into(),
        data: bytes::Bytes::new(),
    };
    commands::auth_response(auth.unwrap_or(&none))
}

/// Runs the handshake on a fresh socket, then sets the reader's frame limit
/// to what the broker allows.
pub(crate) async fn handshake<R, W>(
    reader: &mut FramedRead<R, PulsarCodec>,
    writer: &mut W,
    options: &ConnectionOptions,
) -> Result<Connected, ConnectionError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let exchange = async {
        let fetch = || async {
            match &options.auth {
                Some(auth) => auth::fetch(auth.as_ref()).await.map(Some),
                None => Ok(None),
            }
        };
        // The credentials the broker judges next: those of CONNECT, then
        // those of each AUTH_CHALLENGE answer.
        let mut sent = fetch().await?;
        let connect = commands::connect(sent.as_ref(), options.proxy_to_broker_url.as_deref());
        write_command(writer, &connect).await?;
        loop {
            let frame = match reader.next().await {
                Some(frame) => frame?,
                None => return Err(ConnectionError::Disconnected),
            };
            match interpret(frame.command) {
                Ok(Answer::Connected(connected)) => return Ok(connected),
                Ok(Answer::Challenge) => {
                    debug!(command = Type::AuthChallenge.as_str_name(), "answering");
                    sent = fetch().await?;
                    write_command(writer, &challenge_answer(sent.as_ref())).await?;
                }
                Err(ConnectionError::Server {
                    code: ServerError::AuthenticationError,
                    message,
                    ..
                }) => return Err(refusal(sent.as_ref(), message, clock::unix_millis())),
                Err(e) => return Err(e),
            }
        }
    };
    let connected = tokio::time::timeout(options.operation_timeout, exchange)
        .await
        .unwrap_or(Err(ConnectionError::Timeout {
            op: "CONNECT",
            after: options.operation_timeout,
        }))?;
    // The broker can lower the ceiling on what it sends, never raise it.
    let receive = connected.max_message_size.min(options.max_message_size);
    reader
        .decoder_mut()
        .set_max_frame(wire::max_frame_size_for(receive));
    Ok(connected)
}

async fn write_command<W: AsyncWrite + Unpin>(
    writer: &mut W,
    command: &BaseCommand,
) -> Result<(), ConnectionError> {
    let mut buf = BytesMut::new();
    wire::encode_command(command, &mut buf)?;
    writer.write_all(&buf).await?;
    writer.flush().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{self, ServerError};

    fn connected(max_message_size: Option<i32>) -> BaseCommand {
        BaseCommand {
            r#type: Type::Connected as i32,
            connected: Some(Box::new(proto::CommandConnected {
                server_version: "test".into(),
                protocol_version: Some(21),
                max_message_size,
                feature_flags: None,
            })),
            ..BaseCommand::default()
        }
    }

    fn max_of(answer: Result<Answer, ConnectionError>) -> usize {
        match answer {
            Ok(Answer::Connected(c)) => c.max_message_size,
            other => panic!("not CONNECTED: {other:?}"),
        }
    }

    #[test]
    fn max_message_size_is_honoured_and_defaults_to_5_mib() {
        assert_eq!(max_of(interpret(connected(Some(1024)))), 1024);
        assert_eq!(max_of(interpret(connected(None))), 5 * 1024 * 1024);
        assert_eq!(max_of(interpret(connected(Some(-1)))), 5 * 1024 * 1024);
    }

    #[test]
    fn error_answer_is_a_typed_server_error() {
        let error = BaseCommand {
            r#type: Type::Error as i32,
            error: Some(Box::new(proto::CommandError {
                request_id: 0,
                error: ServerError::AuthenticationError as i32,
                message: "bad token".into(),
            })),
            ..BaseCommand::default()
        };
        assert!(matches!(
            interpret(error),
            Err(ConnectionError::Server { op: "CONNECT", code: ServerError::AuthenticationError, ref message })
                if message == "bad token"
        ));
    }

    fn jwt_expiring_at(exp: u64) -> AuthPayload {
        AuthPayload {
            method: "token".into(),
            data: auth::jwt::jwt(&format!("{{\"exp\":{exp}}}")).into(),
        }
    }

    fn failure_of(e: &ConnectionError) -> (String, AuthFailure) {
        match e {
            ConnectionError::AuthenticationRefused {
                method, failure, ..
            } => (method.to_string(), *failure),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_refused_token_past_its_exp_is_expired_else_rejected() {
        let token = jwt_expiring_at(1_000);
        let msg = || "Failed to authenticate".to_owned();
        assert_eq!(
            failure_of(&refusal(Some(&token), msg(), 1_000_000)),
            ("token".into(), AuthFailure::Expired)
        );
        assert_eq!(
            failure_of(&refusal(Some(&token), msg(), 999_999)).1,
            AuthFailure::Rejected,
            "not expired yet: refused for another reason"
        );
        let opaque = AuthPayload {
            method: "token".into(),
            data: "opaque".into(),
        };
        assert_eq!(
            failure_of(&refusal(Some(&opaque), msg(), 5)).1,
            AuthFailure::Rejected
        );
        assert_eq!(
            failure_of(&refusal(None, msg(), 5)),
            ("none".into(), AuthFailure::Rejected)
        );
        let shown = refusal(Some(&token), msg(), 1_000_000).to_string();
        assert!(
            shown.contains("expired") && !shown.contains("sig"),
            "{shown}"
        );
    }

    #[test]
    fn anything_else_is_unexpected() {
        assert!(matches!(
            interpret(commands::ping()),
            Err(ConnectionError::UnexpectedResponse {
                op: "CONNECT",
                got: "PING"
            })
        ));
    }

    #[test]
    fn challenge_without_credentials_answers_none() {
        let answer = challenge_answer(None);
        let body = answer.auth_response.expect("body");
        assert_eq!(
            body.response.and_then(|r| r.auth_method_name).as_deref(),
            Some("none")
        );
    }
}
