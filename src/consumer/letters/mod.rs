//! Dead-letter and retry-letter copies: what a copy carries and where it
//! goes ([`copy`]), the producers that send them ([`send`]), and
//! [`Consumer::reconsume_later`](super::Consumer::reconsume_later)
//! ([`retry`]).

pub(crate) mod copy;
mod history;
mod retry;
pub(crate) mod send;

pub(crate) use send::Letters;
