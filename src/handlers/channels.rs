//! `*/channel/list` (ADR 0020 §3, Filter mode): the channels the caller
//! reads, agents, people and apps alike.

use super::{invalid, store_failure};
use crate::access;
use crate::hub::RequestContext;
use crate::protocol::channels::{ChannelListParams, ChannelListResult};
use crate::rpc::RpcError;

pub async fn list(
    ctx: RequestContext,
    p: ChannelListParams,
) -> Result<ChannelListResult, RpcError> {
    let max = ctx.hub.config.messages.page_max;
    let limit = match p.limit {
        None => max.min(50),
        Some(l) if (1..=max).contains(&l) => l,
        Some(_) => {
            return Err(invalid(
                "limit",
                format!("must be from 1 to {max} (messages.page_max)"),
            ))
        }
    };
    let (channels, next_after) =
        access::readable_channels(&ctx.hub, ctx.principal(), p.space_id, p.after, limit)
            .await
            .map_err(store_failure)?;
    Ok(ChannelListResult {
        channels,
        next_after,
    })
}
