use serde_json::json;

use super::store_failure;
use crate::access::{self, Target};
use crate::domain::authz::Action;
use crate::hub::RequestContext;
use crate::protocol::events::{AckParams, AckResult};
use crate::rpc::RpcError;
use crate::store::StoreError;

pub async fn ack(ctx: RequestContext, p: AckParams) -> Result<AckResult, RpcError> {
    let me = ctx.principal().id;
    access::check(&ctx, Action::EventAck, Target::stream(me)).await?;
    if p.seq > i64::MAX as u64 {
        return Err(RpcError::invalid_params("seq: is beyond any event")
            .with_data(json!({ "field": "seq" })));
    }
    match ctx.hub.store.ack_events(me, p.seq).await {
        Ok(acked) => Ok(AckResult { acked_seq: acked }),
        Err(StoreError::Conflict(_)) => {
            let pos = ctx
                .hub
                .store
                .stream_position(me)
                .await
                .map_err(store_failure)?;
            Err(RpcError::invalid_params(format!(
                "seq: {} is beyond the last event ({})",
                p.seq, pos.last_seq
            ))
            .with_data(json!({ "field": "seq", "latestSeq": pos.last_seq })))
        }
        Err(e) => Err(store_failure(e)),
    }
}
