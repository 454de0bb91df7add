//! What a method handler receives: the hub and the socket it serves. It
//! lives with the hub because the hub's router is typed by it.

use std::sync::{Arc, OnceLock};

use uuid::Uuid;

use super::Hub;
use crate::identity::Authenticated;
use crate::rpc::Peer;

/// What a handler knows about the socket it serves.
pub struct ConnectionInfo {
    pub id: Uuid,
    pub peer: Peer,
    /// Set once by a successful connect call.
    pub session: OnceLock<Authenticated>,
    /// Where event delivery starts, set by the connect call.
    pub event_start: OnceLock<u64>,
}

/// The context every method handler receives.
#[derive(Clone)]
pub struct RequestContext {
    pub hub: Arc<Hub>,
    pub conn: Arc<ConnectionInfo>,
}

impl RequestContext {
    /// The authenticated principal. The gateway only runs authenticated
    /// methods on authenticated sockets, so this cannot fail there.
    pub fn principal(&self) -> crate::domain::Principal {
        self.conn
            .session
            .get()
            .expect("authenticated method on an authenticated socket")
            .principal
    }
}
