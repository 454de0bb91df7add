//! Every operation of the REST surface, one module per area of
//! `http/mod.rs`'s router. To add a route: declare its `Op` in its area's
//! `ops` (the router's path, spelled with the document's parameter names),
//! then `cargo run -- schema export`; `tests/it/openapi.rs` fails until the
//! router and this list agree (ADR 0028).

mod app_health;
mod apps;
mod commands;
mod identity;
mod interactions;
mod ops;
mod places;
mod webhooks;

use super::op::Op;
use super::schemas::Components;

/// The operations, in the router's order.
pub fn all(c: &mut Components) -> Vec<Op> {
    let mut all = identity::ops(c);
    all.extend(apps::ops(c));
    all.extend(commands::ops(c));
    all.extend(places::ops(c));
    all.extend(interactions::ops(c));
    all.extend(ops::ops(c));
    all.extend(webhooks::ops(c));
    all
}
