//! The ack-timeout tracker ([`UnackedTracker`]) and its storage: ids in
//! tick-sized lists ([`tick_lists`]), an open-addressing index from id to
//! list ([`id_index`]) and the hasher both use ([`id_hash`]).

pub(crate) mod id_hash;
mod id_index;
mod tick_lists;
#[cfg_attr(not(feature = "unstable"), allow(unreachable_pub))]
mod tracker;

#[cfg_attr(not(feature = "unstable"), allow(unreachable_pub))]
pub use tracker::UnackedTracker;
