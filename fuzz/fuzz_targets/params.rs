//! Params decoding of every catalogue method, driven from
//! `protocol::catalogue()`: the first byte picks the method, the rest is the
//! params JSON (read strictly, as the frame parser reads it). Decoding never
//! panics, and a refusal is always `InvalidParams`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchboard::domain::strict_json;
use switchboard::protocol;
use switchboard::rpc::ErrorKind;

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let catalogue = protocol::catalogue();
    let spec = &catalogue[pick as usize % catalogue.len()];
    // An absent `params` member decodes as `{}`.
    let params = if rest.is_empty() {
        None
    } else {
        match strict_json::parse(rest) {
            Ok(value) => Some(value),
            Err(_) => return,
        }
    };
    if let Err(e) = (spec.decode_params)(params) {
        assert_eq!(
            e.kind(),
            Some(ErrorKind::InvalidParams),
            "{}: {e:?}",
            spec.name
        );
    }
});
