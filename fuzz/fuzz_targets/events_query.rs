//! REST query parsing for `GET /api/v1/events` (`http::read_events_query`,
//! the route's own checks): any query string is read or refused as a 400
//! with a code, never a panic; what is read lies within the default bounds.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchboard::config::EventsConfig;

fuzz_target!(|data: &[u8]| {
    let Ok(query) = std::str::from_utf8(data) else {
        return;
    };
    // Only what a request line can carry reaches the route.
    let Ok(uri) = format!("/api/v1/events?{query}").parse::<http::Uri>() else {
        return;
    };
    let cfg = EventsConfig::default();
    match switchboard::http::read_events_query(&uri, &cfg) {
        Ok((limit, wait, _after)) => {
            assert!((1..=cfg.page_max as u64).contains(&limit));
            assert!(wait <= cfg.max_wait_seconds);
        }
        Err(e) => assert_eq!(e.status, http::StatusCode::BAD_REQUEST, "{e:?}"),
    }
});
