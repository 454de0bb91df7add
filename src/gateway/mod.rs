//! The WebSocket gateway: one task per connection that owns the socket, the
//! registry of authenticated connections, and the hygiene rules (auth
//! deadline, heartbeat, frame size, in-flight and rate limits, slow-consumer
//! policy, graceful shutdown).

pub mod connection;
pub mod registry;
pub mod revocations;
pub mod throttle;
mod writer;

pub use connection::{ConnectionInfo, RequestContext};
pub use registry::Registry;
