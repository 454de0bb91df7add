//! Webhook signature header parsing and verification
//! (`webhooks::signature`). The input is lines: id, timestamp, the
//! `webhook-signature` header, space-separated keys (`whsec_`/`whpk_`),
//! `now`; the rest is the body. Key parsing and `verify` never panic, and a
//! body signed by a parsed secret always verifies with its key.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchboard::webhooks::signature::{self, SigningSecret, VerificationKey};

const TOLERANCE: i64 = 300;

fuzz_target!(|data: &[u8]| {
    let mut lines = data.splitn(6, |&b| b == b'\n');
    let mut line = || String::from_utf8_lossy(lines.next().unwrap_or_default()).into_owned();
    let (id, timestamp, header, keys, now) = (line(), line(), line(), line(), line());
    let body = lines.next().unwrap_or_default();
    let now: i64 = now.trim().parse().unwrap_or(0);

    let mut verification = Vec::new();
    for text in keys.split(' ') {
        if let Ok(secret) = SigningSecret::parse(text) {
            let ts = now;
            let sig = secret.sign(&id, ts, body);
            let key = secret.verification_key();
            assert_eq!(
                signature::verify(&id, &ts.to_string(), &sig, body, &[key], now, TOLERANCE),
                Ok(()),
                "a fresh signature verifies"
            );
        }
        if let Ok(key) = VerificationKey::parse(text) {
            verification.push(key);
        }
    }
    let _ = signature::verify(
        &id,
        &timestamp,
        &header,
        body,
        &verification,
        now,
        TOLERANCE,
    );
});
