//! App Card parsing and verification (`domain::card`): `app.json` bytes go
//! through `parse` and the whole `verify` (author, signature, files) against
//! an empty package; a card that parses has canonical bytes and passes
//! `verify` only when its signature holds.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::collections::BTreeMap;
use switchboard::domain::card;

fuzz_target!(|data: &[u8]| {
    let Ok((parsed, value)) = card::parse(data) else {
        return;
    };
    let _ = card::canonical_bytes(&value);
    let signed = card::verify_signature(&parsed, &value);
    let verified = card::verify(data, &BTreeMap::new(), &[]);
    if verified.is_ok() {
        assert!(signed.is_ok(), "verify passed a card whose signature fails");
    }
});
