//! Domain rules: pure types and decisions with no I/O. Everything else in the
//! crate depends on this module; it depends on nothing of the crate.

pub mod agent;
pub mod app_reply;
pub mod authz;
pub mod card;
pub mod command;
pub mod component;
pub mod conversation;
pub mod egress_policy;
pub mod event;
pub mod gate;
pub mod hosted;
pub mod installation;
pub mod keys;
pub mod lease;
pub mod manifest;
pub mod message;
mod part_decode;
pub mod place_names;
pub mod principal;
pub mod strict_json;
pub mod task;
pub mod validate;
pub mod webhook;

pub use principal::{InvokedBy, Principal, PrincipalKind};

/// Milliseconds since the Unix epoch: the one time representation in storage.
pub type Millis = i64;

pub fn now_millis() -> Millis {
    chrono::Utc::now().timestamp_millis()
}
