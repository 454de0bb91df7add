//! The WebSocket gateway: one task per connection that owns the socket, and
//! the hygiene rules (auth deadline, heartbeat, frame size, in-flight and
//! rate limits, slow-consumer policy, graceful shutdown). The registry of
//! authenticated connections and the refused-key budget are part of the
//! hub's state (`hub::registry`, `hub::throttle`).

pub mod connection;
pub mod control;
mod hygiene;
pub mod revocations;
mod writer;

// The registry and the request context belong to the hub's shared state;
// these names stay for the gateway's callers.
pub use crate::hub::{registry, throttle};
pub use crate::hub::{ConnectionInfo, Registry, RequestContext};
