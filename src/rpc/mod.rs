//! JSON-RPC 2.0 peer machinery shared by the hub's gateway and the SDK: frames,
//! the error object, and the table of calls one side made to the other.

pub mod error;
pub mod frame;
pub mod peer;

pub use error::{ErrorKind, RpcError};
pub use frame::{Id, Incoming};
pub use peer::{close_code, CallOutcome, Peer, SendError};
