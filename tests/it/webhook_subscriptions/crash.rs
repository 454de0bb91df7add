//! A hub killed while a delivery is in flight loses nothing and repeats at
//! most that event, with the same `webhook-id`.

use super::{ids, World, CHANGED};
use crate::support::receiver::Scripted;
use crate::support::TestHub;

#[tokio::test]
async fn a_sigkill_during_delivery_repeats_only_the_event_in_flight() {
    let mut w = World::new(TestHub::fast_options()).await;
    let sub = w.subscribed("/scripted", &[CHANGED]).await;
    // The first request never gets an answer: the hub dies holding it.
    w.receiver.script(&[Scripted::Hang]);
    let events = [w.event().await, w.event().await, w.event().await];
    w.receiver.wait_on("/scripted", 1).await;
    w.hub.signal(libc::SIGKILL);
    w.hub.wait_exit(std::time::Duration::from_secs(10)).await;
    // The new process does not take the dead one's claim at startup
    // (another live process may share the database): it lapses at its
    // deadline (`webhooks.claim_ms`), and the event in flight goes again.
    w.restart().await;
    let got = w.receiver.wait_on("/scripted", 4).await;
    let e = |i: usize| events[i].clone();
    assert_eq!(ids(&got), vec![e(0), e(0), e(1), e(2)]);
    assert!(got.iter().all(|r| r.verified.is_ok()));
    // The killed attempt was never recorded; the three after the restart
    // are, in order.
    let log = w.attempts(&sub, 3).await;
    let delivered: Vec<&str> = log.iter().map(|a| a["eventId"].as_str().unwrap()).collect();
    assert_eq!(delivered, vec![e(0), e(1), e(2)]);
    assert!(log
        .iter()
        .all(|a| a["outcome"] == "delivered" && a["attempt"] == 1));
}
