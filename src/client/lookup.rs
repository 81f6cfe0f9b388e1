//! Topic lookup (LOOKUP with its redirects) and PARTITIONED_METADATA.
//!
//! A LOOKUP answer either names the broker that owns the topic (Connect) or
//! sends the client to ask another broker (Redirect, with an
//! `authoritative` flag to pass on). With `proxy_through_service_url` the
//! owner is reached through the address that answered, naming the owner in
//! CONNECT. At most [`MAX_REDIRECTS`] redirects are followed, as in the Java
//! client. Deciding the next step is pure ([`next_step`], [`Redirects`]);
//! only [`lookup`] awaits.

use super::pool::Pool;
use super::service::ServiceHosts;
use super::{BrokerAddress, ClientError, TopicName};
use crate::connection::{Connection, Response};
use crate::proto::CommandLookupTopicResponse;
use crate::proto::command_lookup_topic_response::LookupType;
use crate::wire::commands;

/// How many redirects one lookup follows before giving up.
pub(crate) const MAX_REDIRECTS: u32 = 20;

/// Where to go after one LOOKUP answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    /// The owner: a connection to `logical`, reached through `physical`.
    Connect {
        logical: BrokerAddress,
        physical: BrokerAddress,
    },
    /// Ask again at `to`, passing on the broker's `authoritative` flag.
    Redirect {
        to: BrokerAddress,
        authoritative: bool,
    },
}

/// Interprets a (successful) LOOKUP answer received from `asked`.
///
/// A TLS client (`asked` is TLS) follows only `broker_service_url_tls`, a
/// plaintext one only `broker_service_url`: a `pulsar+ssl://` service never
/// leads to a plaintext connection.
pub(crate) fn next_step(
    topic: &TopicName,
    answer: &CommandLookupTopicResponse,
    asked: &BrokerAddress,
) -> Result<Step, ClientError> {
    let tls = asked.is_tls();
    let (field, scheme) = if tls {
        (&answer.broker_service_url_tls, "pulsar+ssl://")
    } else {
        (&answer.broker_service_url, "pulsar://")
    };
    let url = field
        .as_deref()
        .filter(|url| !url.is_empty())
        .ok_or_else(|| ClientError::NoBrokerUrl {
            topic: topic.to_string(),
            scheme,
        })?;
    let bad = |source| ClientError::BadBrokerUrl {
        topic: topic.to_string(),
        source: Box::new(source),
    };
    let broker = BrokerAddress::from_url(url).map_err(bad)?;
    if broker.is_tls() != tls {
        return Err(bad(ClientError::InvalidUrl {
            url: url.to_owned(),
            problem: super::UrlProblem::SchemeMismatch,
        }));
    }
    Ok(match answer.response() {
        LookupType::Redirect => Step::Redirect {
            to: broker,
            authoritative: answer.authoritative(),
        },
        // `Failed` never gets here: the connection maps it to a server error.
        LookupType::Connect | LookupType::Failed => {
            let physical = if answer.proxy_through_service_url() {
                asked.clone()
            } else {
                broker.clone()
            };
            Step::Connect {
                logical: broker,
                physical,
            }
        }
    })
}

/// Counts the redirects of one lookup.
#[derive(Debug, Default)]
pub(crate) struct Redirects {
    followed: u32,
}

impl Redirects {
    /// Allows one more redirect to `to`, or fails once [`MAX_REDIRECTS`] were followed.
    pub(crate) fn follow(
        &mut self,
        topic: &TopicName,
        to: &BrokerAddress,
    ) -> Result<(), ClientError> {
        if self.followed >= MAX_REDIRECTS {
            return Err(ClientError::TooManyRedirects {
                topic: topic.to_string(),
                redirects: self.followed,
                last: to.to_string(),
            });
        }
        self.followed += 1;
        Ok(())
    }
}

/// The outcome of a lookup: the connection to the owner, and whether the
/// answer said to reach it through the address asked (a Pulsar proxy).
#[derive(Debug)]
pub(crate) struct Owner {
    pub(crate) conn: Connection,
    pub(crate) through_proxy: bool,
}

/// Finds the broker that owns `topic`, starting at a host of `service`,
/// and returns a pooled connection to it.
pub(crate) async fn lookup(
    pool: &Pool,
    service: &ServiceHosts,
    topic: &TopicName,
) -> Result<Owner, ClientError> {
    let (host, first) = service.connect(pool).await?;
    let (mut logical, mut physical, mut first) = (host.clone(), host, Some(first));
    let mut authoritative = false;
    let mut redirects = Redirects::default();
    loop {
        let conn = match first.take() {
            Some(conn) => conn,
            None => pool.get(&logical, &physical).await?,
        };
        let answer = conn
            .request("LOOKUP", |id| {
                commands::lookup(topic.as_str(), id, authoritative)
            })
            .await;
        let answer = match answer {
            Ok(Response::LookupResponse(answer)) => answer,
            Ok(other) => return Err(unexpected("LOOKUP", topic, &other)),
            Err(source) => return Err(request_failed("LOOKUP", topic, source)),
        };
        match next_step(topic, &answer, &physical)? {
            Step::Connect { logical, physical } => {
                let conn = pool.get(&logical, &physical).await?;
                let through_proxy = logical != physical;
                return Ok(Owner {
                    conn,
                    through_proxy,
                });
            }
            Step::Redirect {
                to,
                authoritative: flag,
            } => {
                tracing::debug!(topic = %topic, to = %to, authoritative = flag, "lookup redirected");
                redirects.follow(topic, &to)?;
                logical = to.clone();
                physical = to;
                authoritative = flag;
            }
        }
    }
}

/// How many partitions `topic` has (0: not partitioned), asked at a host of `service`.
pub(crate) async fn partitioned_metadata(
    pool: &Pool,
    service: &ServiceHosts,
    topic: &TopicName,
) -> Result<u32, ClientError> {
    const OP: &str = "PARTITIONED_METADATA";
    let (_, conn) = service.connect(pool).await?;
    match conn
        .request(OP, |id| commands::partitioned_metadata(topic.as_str(), id))
        .await
    {
        Ok(Response::PartitionedMetadataResponse(answer)) => Ok(answer.partitions()),
        Ok(other) => Err(unexpected(OP, topic, &other)),
        Err(source) => Err(request_failed(OP, topic, source)),
    }
}

fn unexpected(op: &'static str, topic: &TopicName, got: &Response) -> ClientError {
    ClientError::UnexpectedResponse {
        op,
        topic: topic.to_string(),
        got: got.kind(),
    }
}

fn request_failed(
    op: &'static str,
    topic: &TopicName,
    source: crate::connection::ConnectionError,
) -> ClientError {
    ClientError::Request {
        op,
        topic: topic.to_string(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topic() -> TopicName {
        TopicName::parse("t").expect("valid")
    }

    fn addr(host: &str) -> BrokerAddress {
        BrokerAddress::new(host, 6650)
    }

    fn answer(kind: LookupType, url: Option<&str>) -> CommandLookupTopicResponse {
        CommandLookupTopicResponse {
            broker_service_url: url.map(str::to_owned),
            response: Some(kind as i32),
            ..CommandLookupTopicResponse::default()
        }
    }

    #[test]
    fn connect_goes_straight_to_the_owner() {
        let a = answer(LookupType::Connect, Some("pulsar://owner:6650"));
        assert_eq!(
            next_step(&topic(), &a, &addr("svc")).expect("step"),
            Step::Connect {
                logical: addr("owner"),
                physical: addr("owner")
            }
        );
    }

    #[test]
    fn proxy_through_service_url_keeps_the_asked_address_as_physical() {
        let a = CommandLookupTopicResponse {
            proxy_through_service_url: Some(true),
            ..answer(LookupType::Connect, Some("pulsar://owner:6650"))
        };
        assert_eq!(
            next_step(&topic(), &a, &addr("proxy")).expect("step"),
            Step::Connect {
                logical: addr("owner"),
                physical: addr("proxy")
            }
        );
    }

    #[test]
    fn redirect_carries_the_authoritative_flag() {
        let a = CommandLookupTopicResponse {
            authoritative: Some(true),
            ..answer(LookupType::Redirect, Some("pulsar://other:7000"))
        };
        assert_eq!(
            next_step(&topic(), &a, &addr("svc")).expect("step"),
            Step::Redirect {
                to: BrokerAddress::new("other", 7000),
                authoritative: true
            }
        );
    }

    #[test]
    fn answers_without_a_usable_url_are_typed_errors() {
        let tls_only = CommandLookupTopicResponse {
            broker_service_url_tls: Some("pulsar+ssl://owner:6651".into()),
            ..answer(LookupType::Connect, None)
        };
        assert!(matches!(
            next_step(&topic(), &tls_only, &addr("svc")),
            Err(ClientError::NoBrokerUrl { .. })
        ));
        let bad = answer(LookupType::Connect, Some("owner:6650"));
        assert!(matches!(
            next_step(&topic(), &bad, &addr("svc")),
            Err(ClientError::BadBrokerUrl { .. })
        ));
    }

    #[test]
    fn a_tls_client_follows_only_the_tls_url() {
        let svc = BrokerAddress::new("svc", 6651).with_tls(true);
        let both = CommandLookupTopicResponse {
            broker_service_url_tls: Some("pulsar+ssl://owner:6651".into()),
            ..answer(LookupType::Connect, Some("pulsar://owner:6650"))
        };
        let owner = BrokerAddress::new("owner", 6651).with_tls(true);
        assert_eq!(
            next_step(&topic(), &both, &svc).expect("step"),
            Step::Connect {
                logical: owner.clone(),
                physical: owner
            }
        );
        let plain_only = answer(LookupType::Connect, Some("pulsar://owner:6650"));
        assert!(matches!(
            next_step(&topic(), &plain_only, &svc),
            Err(ClientError::NoBrokerUrl {
                scheme: "pulsar+ssl://",
                ..
            })
        ));
        let plaintext_in_tls_field = CommandLookupTopicResponse {
            broker_service_url_tls: Some("pulsar://owner:6650".into()),
            ..answer(LookupType::Connect, None)
        };
        assert!(matches!(
            next_step(&topic(), &plaintext_in_tls_field, &svc),
            Err(ClientError::BadBrokerUrl { .. })
        ));
    }

    #[test]
    fn twenty_redirects_are_followed_the_twenty_first_fails() {
        let mut redirects = Redirects::default();
        for _ in 0..MAX_REDIRECTS {
            redirects
                .follow(&topic(), &addr("b"))
                .expect("within the limit");
        }
        match redirects.follow(&topic(), &addr("b")) {
            Err(ClientError::TooManyRedirects {
                redirects, last, ..
            }) => {
                assert_eq!(redirects, 20);
                assert_eq!(last, "b:6650");
            }
            other => panic!("{other:?}"),
        }
    }
}
