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
use crate::auth;
use crate::codec::PulsarCodec;
use crate::proto::BaseCommand;
use crate::proto::base_command::Type;
use crate::wire::{self, commands, commands::AuthPayload};

/// What CONNECTED told us.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Connected {
    pub(crate) server_version: String,
    pub(crate) protocol_version: i32,
    /// The largest message the broker accepts.
    pub(crate) max_message_size: usize,
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
        let credentials = match &options.auth {
            Some(auth) => Some(auth::fetch(auth.as_ref()).await?),
            None => None,
        };
        let connect =
            commands::connect(credentials.as_ref(), options.proxy_to_broker_url.as_deref());
        write_command(writer, &connect).await?;
        loop {
            let frame = match reader.next().await {
                Some(frame) => frame?,
                None => return Err(ConnectionError::Disconnected),
            };
            match interpret(frame.command)? {
                Answer::Connected(connected) => return Ok(connected),
                Answer::Challenge => {
                    debug!(command = Type::AuthChallenge.as_str_name(), "answering");
                    let fresh = match &options.auth {
                        Some(auth) => Some(auth::fetch(auth.as_ref()).await?),
                        None => None,
                    };
                    write_command(writer, &challenge_answer(fresh.as_ref())).await?;
                }
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
