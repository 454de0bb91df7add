//! Handlers of the peer-to-hub methods, one module per area of the catalogue.
//! They translate between protocol types and the identity, store and domain
//! layers; the gateway has already checked the caller's kind.

pub mod network;

use crate::gateway::RequestContext;
use crate::protocol::{network as n, router::Router};

pub fn router() -> Router<RequestContext> {
    Router::new()
        .register::<n::AgentConnect, _, _>(network::agent_connect)
        .register::<n::AppConnect, _, _>(network::app_connect)
        .register::<n::AgentIdentityGet, _, _>(network::agent_identity)
        .register::<n::AppIdentityGet, _, _>(network::app_identity)
}
