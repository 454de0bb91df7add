//! Signed outgoing HTTP (Standard Webhooks): the signature scheme, signing
//! keys sealed at rest, the SSRF rules and the egress client that applies
//! them, and the sender that ties signing to sending.

pub mod egress;
pub mod interactions;
/// The pure rules live in the domain (config checks them too); the name stays here.
pub use crate::domain::egress_policy;
pub mod keys;
pub mod sender;
pub mod signature;
pub mod subscription_secret;
