//! Manifest validation (`domain::manifest::validate`) with the default
//! bounds of a fresh configuration: any JSON document is accepted or refused
//! with at least one problem, each naming a JSON pointer.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;
use switchboard::config::Config;
use switchboard::domain::manifest::{self, ManifestBounds};
use switchboard::domain::strict_json;

fn bounds() -> &'static ManifestBounds {
    static BOUNDS: OnceLock<ManifestBounds> = OnceLock::new();
    BOUNDS.get_or_init(|| Config::default().manifest_bounds())
}

fuzz_target!(|data: &[u8]| {
    let Ok(doc) = strict_json::parse(data) else {
        return;
    };
    if let Err(problems) = manifest::validate(&doc, bounds()) {
        assert!(!problems.is_empty(), "a refusal names its problems");
        for p in &problems {
            assert!(p.pointer.is_empty() || p.pointer.starts_with('/'), "{p:?}");
        }
    }
});
