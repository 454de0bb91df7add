//! How an installation reads on the wire (ADR 0023 §3, §5).

use serde_json::{json, Value};

use crate::store::InstallationRecord;

/// `{installationId, state, scopes: {requested, granted, effective}}`: the
/// registration answer's `installation` (absent, never `null`, when the
/// app waits for the operator).
pub(super) fn installation_summary(r: &InstallationRecord) -> Value {
    json!({
        "installationId": r.id,
        "state": r.state,
        "scopes": {
            "requested": r.requested.to_vec(),
            "granted": r.granted.to_vec(),
            "effective": r.effective().to_vec(),
        },
    })
}
