use serde_json::json;
use tracing::info;

use crate::domain::PrincipalKind;
use crate::gateway::RequestContext;
use crate::identity::{self, Authenticated, IdentityError};
use crate::protocol::network::{
    AgentConnectParams, AgentConnectResult, AgentIdentity, AppConnectParams, AppConnectResult,
    AppIdentity, ConnectionLimits, Heartbeat, NoParams, RateLimit, VersionRange,
};
use crate::protocol::{PROTOCOL_VERSION_MAX, PROTOCOL_VERSION_MIN};
use crate::rpc::{ErrorKind, RpcError};

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
    ConnectionLimits {
        max_frame_bytes: g.max_frame_bytes as u64,
        transport_max_frame_bytes: g.transport_max_frame_bytes as u64,
        max_in_flight_requests: g.max_in_flight_requests,
        outbound_queue_capacity: g.outbound_queue_capacity,
        rate_limit: RateLimit {
            per_second: g.rate_limit_per_second,
            burst: g.rate_limit_burst,
        },
        heartbeat: Heartbeat {
            interval_ms: g.heartbeat_interval_ms,
            timeout_ms: g.heartbeat_timeout_ms,
        },
    }
}

/// Checks the key and binds the socket to its principal.
async fn connect(
    ctx: &RequestContext,
    key: &str,
    kind: PrincipalKind,
) -> Result<Authenticated, RpcError> {
    let auth = match identity::authenticate(ctx.hub.store.as_ref(), key, Some(kind)).await {
        Ok(auth) => auth,
        Err(IdentityError::BadKey) => {
            return Err(RpcError::unauthorized("invalid or revoked key"));
        }
        Err(e) => {
            tracing::error!(error = %e, "key check failed");
            return Err(RpcError::internal());
        }
    };
    if ctx.conn.session.set(auth.clone()).is_err() {
        return Err(RpcError::conflict("this socket is already connected"));
    }
    ctx.hub.registry.add(
        ctx.conn.id,
        auth.principal,
        auth.key_id.clone(),
        ctx.conn.peer.clone(),
    );
    info!(
        connection = %ctx.conn.id,
        principal = %auth.principal.id,
        kind = %auth.principal.kind,
        key_id = %auth.key_id,
        "connected"
    );
    Ok(auth)
}

pub async fn agent_connect(
    ctx: RequestContext,
    p: AgentConnectParams,
) -> Result<AgentConnectResult, RpcError> {
    let version = negotiate(p.protocol)?;
    let auth = connect(&ctx, &p.agent_key, PrincipalKind::Agent).await?;
    Ok(AgentConnectResult {
        agent_id: auth.principal.id,
        connection_id: ctx.conn.id,
        protocol_version: version,
        limits: limits(&ctx),
    })
}

pub async fn app_connect(
    ctx: RequestContext,
    p: AppConnectParams,
) -> Result<AppConnectResult, RpcError> {
    let version = negotiate(p.protocol)?;
    let auth = connect(&ctx, &p.app_key, PrincipalKind::App).await?;
    Ok(AppConnectResult {
        app_id: auth.principal.id,
        connection_id: ctx.conn.id,
        protocol_version: version,
        limits: limits(&ctx),
    })
}

fn rfc3339(millis: i64) -> String {
    chrono::DateTime::from_timestamp_millis(millis)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

fn store_failure(e: crate::store::StoreError) -> RpcError {
    tracing::error!(error = %e, "store failure");
    RpcError::internal()
}

pub async fn agent_identity(ctx: RequestContext, _: NoParams) -> Result<AgentIdentity, RpcError> {
    let me = ctx.principal();
    let record = ctx
        .hub
        .store
        .principal(me.id)
        .await
        .map_err(store_failure)?
        .ok_or_else(|| RpcError::not_found("agent not found"))?;
    Ok(AgentIdentity {
        agent_id: record.id,
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
        .ok_or_else(|| RpcError::not_found("app not found"))?;
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
    fn negotiation_picks_the_highest_shared_version() {
        assert_eq!(negotiate(None).unwrap(), PROTOCOL_VERSION_MAX);
        assert_eq!(negotiate(Some(VersionRange { min: 1, max: 9 })).unwrap(), 1);
        let err = negotiate(Some(VersionRange { min: 2, max: 3 })).unwrap_err();
        assert_eq!(err.kind(), Some(ErrorKind::UnsupportedVersion));
        let err = negotiate(Some(VersionRange { min: 3, max: 2 })).unwrap_err();
        assert_eq!(err.kind(), Some(ErrorKind::InvalidParams));
    }
}
