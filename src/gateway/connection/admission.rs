//! What a socket's requests pass before they run: a connect (once per
//! socket, under the refused-key budget) and, for every other method, the
//! admission checks (session kind, rate, an id not in flight, a free
//! in-flight slot).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::{json, Value};

use super::{bounded, Reader};
use crate::gateway::hygiene::{answer_even_if_it_panics, presented_key_id};
use crate::hub::RequestContext;
use crate::protocol::Caller;
use crate::rpc::frame::Id;
use crate::rpc::{close_code, ErrorKind, RpcError};
use crate::telemetry::names;

impl Reader {
    /// The checks an authenticated method passes before it runs: a session
    /// of the right kind, the principal's rate, an id not in flight, a free
    /// in-flight slot.
    pub(super) fn admit(
        &self,
        id: &Id,
        name: &'static str,
        caller: Caller,
    ) -> Result<(IdSlot, tokio::sync::OwnedSemaphorePermit), RpcError> {
        let session = self.conn.session.get().ok_or_else(|| {
            RpcError::unauthorized(
                "not connected: call agent/network/connect, app/network/connect or person/network/connect first",
            )
        })?;
        let expected = match caller {
            Caller::Agent => crate::domain::PrincipalKind::Agent,
            Caller::Person => crate::domain::PrincipalKind::Person,
            _ => crate::domain::PrincipalKind::App,
        };
        if session.principal.kind != expected {
            let article = if caller == Caller::Person { "a" } else { "an" };
            return Err(RpcError::forbidden(format!(
                "{name} may be called only by {article} {}",
                caller.as_str()
            )));
        }
        if let Err(not_until) = self.hub.limiter.check_key(&session.principal.id) {
            let wait = not_until.wait_time_from(governor::clock::Clock::now(
                &governor::clock::DefaultClock::default(),
            ));
            return Err(RpcError::new(
                ErrorKind::RateLimited,
                "rate limit exceeded (gateway.rate_limit_per_second)",
            )
            .with_data(json!({ "retryAfterMs": wait.as_millis() as u64 })));
        }
        let id_slot = self.claim_id(id).ok_or_else(|| {
            RpcError::invalid_request(format!(
                "id {} is already in flight on this socket; use a new id per request",
                bounded(&id.to_string())
            ))
        })?;
        let permit = self.in_flight.clone().try_acquire_owned().map_err(|_| {
            let limit = self.hub.config.gateway.max_in_flight_requests;
            RpcError::new(
                ErrorKind::RateLimited,
                format!(
                    "too many requests in flight on this socket (gateway.max_in_flight_requests = {limit})"
                ),
            )
            .with_data(json!({ "limit": limit }))
        })?;
        Ok((id_slot, permit))
    }

    /// A connect runs inline, so requests pipelined behind it see its
    /// session. Refused keys are budgeted per socket and per source address:
    /// past either budget no key is looked up any more.
    pub(super) async fn connect(
        &mut self,
        id: Id,
        route: &crate::protocol::router::Route<RequestContext>,
        ctx: RequestContext,
        params: Option<Value>,
    ) {
        let name = route.spec.name;
        let started = Instant::now();
        if let Some(s) = self.conn.session.get() {
            let err = RpcError::conflict(format!(
                "this socket is already connected as {} {}",
                s.principal.kind, s.principal.id
            ));
            self.finish(&id, name, started, Err(err));
            return;
        }
        let hub = self.hub.clone();
        let key_id = presented_key_id(params.as_ref());
        let attempt = hub.refused_keys.begin(self.remote, key_id.as_deref()).await;
        let result = match attempt {
            Ok(_) => answer_even_if_it_panics(name, self.conn.id, route.call(ctx, params)).await,
            Err(wait) => Err(RpcError::new(
                ErrorKind::RateLimited,
                "too many failed connects from this address (gateway.failed_connects_per_address)",
            )
            .with_data(json!({ "retryAfterMs": wait.as_millis().max(1) as u64 }))),
        };
        let connected = result.is_ok();
        let kind = result.as_ref().err().and_then(RpcError::kind);
        self.finish(&id, name, started, result);
        if !connected && self.conn.session.get().is_some() {
            // The connect failed (or panicked) after binding the session:
            // the socket is neither connected nor cleanly refused, so it
            // ends; the client reconnects and resumes.
            self.conn
                .peer
                .close(close_code::INTERNAL, "could not complete the connect");
        }
        // Only a refused key keeps its failure spent; malformed params cost
        // no lookup.
        match (attempt, kind) {
            (Ok(attempt), _) if connected => {
                attempt.accepted();
                self.authenticated = true;
                metrics::gauge!(names::CONNECTIONS, "kind" => "unauthenticated").decrement(1.0);
                // After the answer is queued, so events follow it.
                self.start_events();
                return;
            }
            (Ok(attempt), Some(ErrorKind::Unauthorized)) => attempt.refused(),
            (Err(_), _) => {}
            (Ok(attempt), _) => return attempt.unchecked(),
        }
        self.failed_connects += 1;
        if self.failed_connects >= self.hub.config.gateway.max_failed_connects_per_socket {
            metrics::counter!(names::DISCONNECTS, "reason" => "failed_connects").increment(1);
            self.conn.peer.close(
                close_code::POLICY_VIOLATION,
                "too many failed connects (gateway.max_failed_connects_per_socket)",
            );
        }
    }

    /// Marks `id` as in flight; `None` when it already is.
    fn claim_id(&self, id: &Id) -> Option<IdSlot> {
        let key = id.to_string();
        let mut ids = self.in_flight_ids.lock().unwrap_or_else(|p| p.into_inner());
        ids.insert(key.clone()).then(|| IdSlot {
            ids: self.in_flight_ids.clone(),
            key,
        })
    }
}

/// A request id in flight; freed when dropped.
pub(super) struct IdSlot {
    ids: Arc<Mutex<HashSet<String>>>,
    key: String,
}

impl Drop for IdSlot {
    fn drop(&mut self) {
        self.ids
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.key);
    }
}
