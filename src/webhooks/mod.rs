//! Signed outgoing HTTP (Standard Webhooks). This module holds the signature
//! scheme; key storage, rotation and the egress client build on it.

pub mod egress_policy;
pub mod keys;
pub mod signature;
