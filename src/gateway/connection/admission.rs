//! What a socket's requests pass before they run: a connect (once per
//! socket, under the refused-key budget) and, for every other method, the
//! admission checks (session kind, the rate of the method's class, an id
//! not in flight, a free in-flight slot).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::{json, Value};
use uuid::Uuid;

use super::{bounded, Reader};
use crate::domain::authz::{Reason, ResourceKind, Subject};
use crate::domain::principal::Principal;
use crate::domain::PrincipalKind;
use crate::gateway::hygiene::{answer_even_if_it_panics, presented_key_id};
use crate::hub::RequestContext;
use crate::protocol::{Caller, MethodSpec, RateClass};
use crate::rpc::frame::Id;
use crate::rpc::{close_code, ErrorKind, RpcError};
use crate::telemetry::names;

impl Reader {
    /// The checks an authenticated method passes before it runs: a session
    /// of the right kind, the principal's rate in the method's class, an id
    /// not in flight, a free in-flight slot.
    pub(super) fn admit(
        &self,
        id: &Id,
        spec: &MethodSpec,
    ) -> Result<(IdSlot, tokio::sync::OwnedSemaphorePermit), RpcError> {
        let session = self.conn.session.get().ok_or_else(|| {
            RpcError::unauthorized(
                "not connected: call agent/network/connect, app/network/connect or person/network/connect first",
            )
        })?;
        self.check_audience(session.principal, spec)?;
        self.spend_rate(session.principal.id, spec.rate_class)?;
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

    /// A method outside the caller's audience is not in its catalogue: the
    /// decision's first step (ADR 0020 §3), answered and audited as any
    /// denial. It is decided before the params are read, so it is about
    /// no resource (the hub, nil id) and nothing the caller sent is kept.
    fn check_audience(&self, principal: Principal, spec: &MethodSpec) -> Result<(), RpcError> {
        let expected = match spec.caller {
            Caller::Agent => PrincipalKind::Agent,
            Caller::Person => PrincipalKind::Person,
            _ => PrincipalKind::App,
        };
        if principal.kind == expected {
            return Ok(());
        }
        let reason = Reason::SubjectKindNotAllowed;
        let mut data = json!({ "reason": reason.as_str() });
        if let Some(action) = spec.action {
            data["action"] = json!(action.as_str());
            let subject = Subject::Principal {
                id: principal.id,
                kind: principal.kind,
                active: true,
            };
            crate::access::record_denial(
                &self.hub,
                &subject,
                action,
                ResourceKind::Hub,
                Uuid::nil(),
                reason,
            );
        }
        let article = if spec.caller == Caller::Person {
            "a"
        } else {
            "an"
        };
        Err(RpcError::forbidden(format!(
            "{} may be called only by {article} {}",
            spec.name,
            spec.caller.as_str()
        ))
        .with_data(data))
    }

    /// One call of the method's rate class (`ratelimit.<class>`).
    fn spend_rate(&self, principal: Uuid, class: RateClass) -> Result<(), RpcError> {
        self.hub.limiters.check(class, principal).map_err(|wait| {
            let class = class.as_str();
            RpcError::new(
                ErrorKind::RateLimited,
                format!(
                    "rate limit of class {class} exceeded (ratelimit.{class}.per_second, ratelimit.{class}.burst)"
                ),
            )
            .with_data(json!({ "retryAfterMs": (wait.as_millis() as u64).max(1), "class": class }))
        })
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
        let installation_close = result
            .as_ref()
            .err()
            .and_then(crate::handlers::network::close_for_refused_connect);
        self.finish(&id, name, started, result);
        if let Some((code, reason)) = installation_close {
            // After the answer is queued, so the app reads why.
            self.conn.peer.close(code, reason);
        }
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
