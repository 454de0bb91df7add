//! Frame parsing and classification (`rpc::frame::parse`, strict JSON): any
//! text frame is classified without a panic, the answer the hub writes for
//! an invalid one is a JSON-RPC error frame, and a request's id round-trips.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchboard::rpc::frame::{self, Incoming};

fuzz_target!(|data: &[u8]| {
    // The gateway refuses binary frames and invalid UTF-8 before parsing.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match frame::parse(text) {
        Incoming::Invalid { id, error } => {
            let answer = frame::error(id.as_ref(), &error);
            let value: serde_json::Value =
                serde_json::from_str(&answer).expect("the error answer is JSON");
            assert_eq!(value["jsonrpc"], "2.0", "{answer}");
            assert!(value["error"]["code"].is_i64(), "{answer}");
        }
        // The id is echoed as received: the answer the hub writes for it
        // reads back as a response to the same id.
        Incoming::Request { id, .. } => match frame::parse(&frame::result(&id, &0)) {
            Incoming::Response {
                id: echoed,
                outcome,
            } => {
                assert_eq!(echoed, id);
                assert!(outcome.is_ok());
            }
            other => panic!("the answer to {id} reads back as {other:?}"),
        },
        Incoming::Notification { .. }
        | Incoming::Response { .. }
        | Incoming::MalformedResponse { .. } => {}
    }
});
