use crate::domain::event::{rfc3339, StreamPosition};
use serde_json::json;
use tracing::info;

use super::store_failure;
use crate::domain::authz::{Action, Reason, ResourceKind};
use crate::domain::installation::{InstallationState, Scope};
use crate::domain::PrincipalKind;
use crate::hub::RequestContext;
use crate::identity::{self, Authenticated, IdentityError};
use crate::protocol::events::{EventStreamInfo, Resume, ResyncInfo};
use crate::protocol::network::{
    AgentConnectParams, AgentConnectResult, AgentIdentity, AppConnectParams, AppConnectResult,
    AppIdentity, ConnectionLimits, Heartbeat, NoParams, PersonConnectParams, PersonConnectResult,
    RateLimit, VersionRange,
};
use crate::protocol::{PROTOCOL_VERSION_MAX, PROTOCOL_VERSION_MIN};
use crate::rpc::{close_code, ErrorKind, RpcError};

/// The highest version both sides speak.
pub fn negotiate(requested: Option<VersionRange>) -> Result<u32, RpcError> {
    let Some(range) = requested else {
        return Ok(PROTOCOL_VERSION_MAX);
    };
    if range.min > range.max {
        return Err(
            RpcError::invalid_params("protocol.min must not exceed protocol.max")
                .with_data(json!({ "field": "protocol.min" })),
        );
    }
    let high = range.max.min(PROTOCOL_VERSION_MAX);
    let low = range.min.max(PROTOCOL_VERSION_MIN);
    if low > high {
        return Err(RpcError::new(
            ErrorKind::UnsupportedVersion,
            format!(
                "no supported protocol version in {}..={}; this hub speaks {PROTOCOL_VERSION_MIN}..={PROTOCOL_VERSION_MAX}",
                range.min, range.max
            ),
        )
        .with_data(json!({ "supported": { "min": PROTOCOL_VERSION_MIN, "max": PROTOCOL_VERSION_MAX } })));
    }
    Ok(high)
}

fn limits(ctx: &RequestContext) -> ConnectionLimits {
    let g = &ctx.hub.config.gateway;
    let default_rate = ctx.hub.config.ratelimit.default;
    ConnectionLimits {
        max_frame_bytes: g.max_frame_bytes as u64,
        transport_max_frame_bytes: g.transport_max_frame_bytes as u64,
        max_in_flight_requests: g.max_in_flight_requests,
        outbound_queue_capacity: g.outbound_queue_capacity,
        rate_limit: RateLimit {
            per_second: default_rate.per_second,
            burst: default_rate.burst,
        },
        heartbeat: Heartbeat {
            interval_ms: g.heartbeat_interval_ms,
            timeout_ms: g.heartbeat_timeout_ms,
        },
    }
}

/// Checks the key, finds where event delivery starts, and only then binds the
/// socket to its principal, so a refused connect leaves nothing behind.
async fn connect(
    ctx: &RequestContext,
    key: &str,
    kind: PrincipalKind,
    resume: Option<Resume>,
) -> Result<(Authenticated, EventStreamInfo), RpcError> {
    let auth = authenticate(ctx, key, kind).await?;
    let pos = ctx
        .hub
        .store
        .stream_position(auth.principal.id)
        .await
        .map_err(store_failure)?;
    let epoch = &ctx.hub.sync_epoch;
    let start = event_start(epoch, &pos, &resume)?;
    if ctx.conn.session.set(auth.clone()).is_err() {
        return Err(RpcError::conflict("this socket is already connected"));
    }
    let _ = ctx.conn.event_start.set(start);
    ctx.hub.registry.add(
        ctx.conn.id,
        auth.principal,
        auth.key_id.clone(),
        ctx.conn.peer.clone(),
    );
    if auth.principal.kind == PrincipalKind::App {
        record_presence(ctx, &auth).await?;
    }
    check_still_active(ctx, &auth).await?;
    info!(
        connection = %ctx.conn.id,
        principal = %auth.principal.id,
        kind = %auth.principal.kind,
        key_id = %auth.key_id,
        start_after = start,
        "connected"
    );
    let info = EventStreamInfo {
        sync_epoch: epoch.clone(),
        start_after: start,
        latest_seq: pos.last_seq,
        acked_seq: pos.acked_seq,
    };
    Ok((auth, info))
}

async fn authenticate(
    ctx: &RequestContext,
    key: &str,
    kind: PrincipalKind,
) -> Result<Authenticated, RpcError> {
    match identity::authenticate(ctx.hub.store.as_ref(), key, Some(kind)).await {
        Ok(auth) => Ok(auth),
        Err(IdentityError::BadKey) => Err(RpcError::unauthorized("invalid or revoked key")),
        Err(e) => {
            tracing::error!(error = %e, "key check failed");
            Err(RpcError::internal())
        }
    }
}

/// The seq event delivery starts after: the resume point if the log can
/// serve it in the same sync epoch, else the last acknowledged seq.
fn event_start(
    epoch: &str,
    pos: &StreamPosition,
    resume: &Option<Resume>,
) -> Result<u64, RpcError> {
    let resync = |message: String| {
        RpcError::new(ErrorKind::ResyncRequired, message).with_data(
            serde_json::to_value(ResyncInfo {
                sync_epoch: epoch.to_string(),
                oldest_seq: pos.oldest_seq,
                latest_seq: pos.last_seq,
                acked_seq: pos.acked_seq,
            })
            .expect("resync info serializes"),
        )
    };
    let start = match resume {
        Some(r) if r.sync_epoch != epoch => {
            return Err(resync(
                "the event log's syncEpoch changed; fetch current state and resume from data.oldestSeq - 1 with the new syncEpoch".into(),
            ))
        }
        Some(r) if !pos.can_serve_after(r.after) => {
            return Err(resync(format!(
                "the log cannot serve events after seq {}: it holds seq {} to {}",
                r.after, pos.oldest_seq, pos.last_seq
            )))
        }
        Some(r) => r.after,
        None if !pos.can_serve_after(pos.acked_seq) => {
            return Err(resync(format!(
                "events after the last acknowledged seq {} were pruned; resume explicitly from data.oldestSeq - 1",
                pos.acked_seq
            )))
        }
        None => pos.acked_seq,
    };
    Ok(start)
}

/// A revocation that committed between the key check and the registration
/// closed nobody: look again now that this socket is findable.
/// In cluster mode, where the app's socket is (ADR 0035). A socket the
/// cluster cannot find would take no callbacks: it is closed instead.
async fn record_presence(ctx: &RequestContext, auth: &Authenticated) -> Result<(), RpcError> {
    let recorded =
        crate::hooks::presence::connected(&ctx.hub, ctx.conn.id, auth.principal.id).await;
    recorded.map_err(|e| {
        ctx.conn
            .peer
            .close(crate::rpc::close_code::INTERNAL, "connect failed; retry");
        store_failure(e)
    })
}

async fn check_still_active(ctx: &RequestContext, auth: &Authenticated) -> Result<(), RpcError> {
    let still_active = match ctx.hub.store.key(&auth.key_id).await {
        Ok(k) => k,
        Err(e) => {
            // The session is bound already; a socket we could not vouch for
            // must not stay open half connected.
            ctx.conn
                .peer
                .close(crate::rpc::close_code::INTERNAL, "connect failed; retry");
            return Err(store_failure(e));
        }
    };
    if still_active.is_none_or(|k| k.revoked_at.is_some()) {
        ctx.conn
            .peer
            .close(crate::rpc::close_code::KEY_REVOKED, "key revoked");
        return Err(RpcError::unauthorized("invalid or revoked key"));
    }
    if auth.principal.kind == PrincipalKind::App {
        check_installed(ctx, auth.principal.id).await?;
    }
    Ok(())
}

/// An app connects through an active installation holding
/// `events:subscribe` (ADR 0023 §6, "Connect"). Read from the store, not
/// the cache, and after the socket is registered: a suspend either is seen
/// here or finds the socket to close. The refusal's close code
/// ([`close_for_refused_connect`]) follows the answer.
async fn check_installed(ctx: &RequestContext, app_id: uuid::Uuid) -> Result<(), RpcError> {
    let installation = match ctx.hub.installations.read_fresh(app_id).await {
        Ok(i) => i,
        Err(e) => {
            ctx.conn
                .peer
                .close(crate::rpc::close_code::INTERNAL, "connect failed; retry");
            return Err(store_failure(e));
        }
    };
    let reason = match installation.map(|i| i.facts()) {
        None => Reason::AppNotInstalled,
        Some(f) if f.state != InstallationState::Active => match f.state {
            InstallationState::Suspended => Reason::AppSuspended,
            _ => Reason::AppNotInstalled,
        },
        Some(f) if !f.scopes.contains(Scope::EventsSubscribe) => Reason::ScopeMissing,
        Some(_) => return Ok(()),
    };
    let subject = crate::access::subject_of(ctx.principal());
    crate::access::record_denial(
        &ctx.hub,
        &subject,
        Action::EventRead,
        ResourceKind::Stream,
        app_id,
        reason,
    );
    Err(RpcError::new(
        ErrorKind::Forbidden,
        format!("app/network/connect refused: {}", reason.as_str()),
    )
    .with_data(json!({ "reason": reason.as_str(), "action": Action::EventRead.as_str() })))
}

/// The close code that follows a connect refused for the app's
/// installation: 4012 when it is not active, 4018 when it lacks
/// `events:subscribe`; `None` for any other refusal.
pub fn close_for_refused_connect(err: &RpcError) -> Option<(u16, &'static str)> {
    if err.kind() != Some(ErrorKind::Forbidden) {
        return None;
    }
    let reason = err.data.as_ref()?.get("reason")?.as_str()?;
    match Reason::parse(reason)? {
        Reason::AppNotInstalled => Some((close_code::APP_INACTIVE, "app_not_installed")),
        Reason::AppSuspended => Some((close_code::APP_INACTIVE, "app_suspended")),
        Reason::ScopeMissing => Some((close_code::SCOPE_MISSING, "scope_missing")),
        _ => None,
    }
}

pub async fn agent_connect(
    ctx: RequestContext,
    p: AgentConnectParams,
) -> Result<AgentConnectResult, RpcError> {
    let version = negotiate(p.protocol)?;
    let (auth, events) = connect(&ctx, &p.agent_key, PrincipalKind::Agent, p.resume).await?;
    Ok(AgentConnectResult {
        agent_id: auth.principal.id,
        connection_id: ctx.conn.id,
        protocol_version: version,
        limits: limits(&ctx),
        events,
    })
}

pub async fn app_connect(
    ctx: RequestContext,
    p: AppConnectParams,
) -> Result<AppConnectResult, RpcError> {
    let version = negotiate(p.protocol)?;
    let (auth, events) = connect(&ctx, &p.app_key, PrincipalKind::App, p.resume).await?;
    Ok(AppConnectResult {
        app_id: auth.principal.id,
        connection_id: ctx.conn.id,
        protocol_version: version,
        limits: limits(&ctx),
        events,
    })
}

/// An authenticated principal without its record: the hub's fault (its
/// key was checked against that record), not something the caller named.
fn own_record_missing() -> RpcError {
    tracing::error!("an authenticated principal has no record");
    RpcError::internal()
}

pub async fn person_connect(
    ctx: RequestContext,
    p: PersonConnectParams,
) -> Result<PersonConnectResult, RpcError> {
    let version = negotiate(p.protocol)?;
    let (auth, events) = connect(&ctx, &p.person_key, PrincipalKind::Person, p.resume).await?;
    Ok(PersonConnectResult {
        person_id: auth.principal.id,
        connection_id: ctx.conn.id,
        protocol_version: version,
        limits: limits(&ctx),
        events,
    })
}

/// `agent/identity/get` and its twin `person/identity/get`.
pub async fn agent_identity(ctx: RequestContext, _: NoParams) -> Result<AgentIdentity, RpcError> {
    let me = ctx.principal();
    let record = ctx
        .hub
        .store
        .principal(me.id)
        .await
        .map_err(store_failure)?
        .ok_or_else(own_record_missing)?;
    Ok(AgentIdentity {
        principal_id: record.id,
        agent_id: (record.kind == PrincipalKind::Agent).then_some(record.id),
        name: record.name,
        description: record.description,
        created_at: rfc3339(record.created_at),
    })
}

pub async fn app_identity(ctx: RequestContext, _: NoParams) -> Result<AppIdentity, RpcError> {
    let me = ctx.principal();
    let record = ctx
        .hub
        .store
        .app(me.id)
        .await
        .map_err(store_failure)?
        .ok_or_else(own_record_missing)?;
    Ok(AppIdentity {
        app_id: record.principal.id,
        name: record.principal.name,
        description: record.manifest.description.clone(),
        manifest: record.manifest,
        created_at: rfc3339(record.principal.created_at),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_installation_refusal_names_its_close_code_and_no_other_does() {
        let refused = |reason: &str| {
            RpcError::new(ErrorKind::Forbidden, "refused")
                .with_data(json!({ "reason": reason, "action": "event.read" }))
        };
        assert_eq!(
            close_for_refused_connect(&refused("app_suspended")),
            Some((close_code::APP_INACTIVE, "app_suspended"))
        );
        assert_eq!(
            close_for_refused_connect(&refused("app_not_installed")),
            Some((close_code::APP_INACTIVE, "app_not_installed"))
        );
        assert_eq!(
            close_for_refused_connect(&refused("scope_missing")),
            Some((close_code::SCOPE_MISSING, "scope_missing"))
        );
        assert_eq!(close_for_refused_connect(&refused("no_grant")), None);
        let unauthorized = RpcError::unauthorized("invalid or revoked key")
            .with_data(json!({ "reason": "app_suspended" }));
        assert_eq!(close_for_refused_connect(&unauthorized), None);
        assert_eq!(close_for_refused_connect(&RpcError::internal()), None);
    }

    #[test]
    fn negotiation_picks_the_highest_shared_version() {
        assert_eq!(negotiate(None).unwrap(), PROTOCOL_VERSION_MAX);
        assert_eq!(negotiate(Some(VersionRange { min: 1, max: 9 })).unwrap(), 1);
        let err = negotiate(Some(VersionRange { min: 2, max: 3 })).unwrap_err();
        assert_eq!(err.kind(), Some(ErrorKind::UnsupportedVersion));
        let err = negotiate(Some(VersionRange { min: 3, max: 2 })).unwrap_err();
        assert_eq!(err.kind(), Some(ErrorKind::InvalidParams));
    }
}
