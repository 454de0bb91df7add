//! `GET /console/api/stream`: the live view over server-sent events. One
//! reader per hub (`Feed`) reads the view every `console.poll_interval_ms`
//! while at least one console is open, whatever the number of tabs; each
//! stream sends a `snapshot` (every section), then a `changes` event with
//! only the sections that changed, and ends with `ended {reason}` when its
//! session ends (idle, expired, logged out) or the hub shuts down.

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use futures_util::stream::{self, Stream};
use serde_json::json;
use tokio::sync::watch;

use super::login::operator;
use super::view::{self, Sections};
use super::Console;
use crate::http::error::ApiError;
use crate::hub::Hub;

type Latest = Option<Arc<Sections>>;

/// The hub's one reader of the view, shared by every open stream.
pub struct Feed {
    latest: watch::Sender<Latest>,
    /// Whether the reader runs; changed only under this lock, with the
    /// subscriber count read under it too, so a new stream never finds a
    /// reader that is about to stop.
    running: Mutex<bool>,
    /// Streams open now, bounded by `console.max_streams`.
    open: Arc<AtomicUsize>,
}

impl Default for Feed {
    fn default() -> Self {
        Feed {
            latest: watch::channel(None).0,
            running: Mutex::new(false),
            open: Arc::new(AtomicUsize::new(0)),
        }
    }
}

/// One open stream's place under `console.max_streams`, given back when
/// the stream ends or its client goes away (the body is dropped).
struct StreamSlot(Arc<AtomicUsize>);

impl Drop for StreamSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Feed {
    /// A receiver of the view, starting the reader if none runs.
    fn subscribe(self: &Arc<Self>, hub: &Arc<Hub>, node: Arc<str>) -> watch::Receiver<Latest> {
        let mut running = self.running.lock().expect("feed lock");
        let receiver = self.latest.subscribe();
        if !*running {
            *running = true;
            hub.tasks
                .spawn(read_while_watched(self.clone(), hub.clone(), node));
        }
        receiver
    }

    /// A place for one more stream, if fewer than `max` are open.
    fn slot(&self, max: usize) -> Option<StreamSlot> {
        self.open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| StreamSlot(self.open.clone()))
    }

    /// Stops the reader when no stream is left; says whether it stopped.
    fn stop_if_unwatched(&self) -> bool {
        let mut running = self.running.lock().expect("feed lock");
        if self.latest.receiver_count() > 0 {
            return false;
        }
        *running = false;
        // The next first stream waits for a fresh read, never this one.
        self.latest.send_replace(None);
        true
    }
}

async fn read_while_watched(feed: Arc<Feed>, hub: Arc<Hub>, node: Arc<str>) {
    let interval = Duration::from_millis(hub.config.console.poll_interval_ms);
    loop {
        match view::read(&hub, &node).await {
            Ok(sections) => {
                feed.latest.send_replace(Some(Arc::new(sections)));
            }
            Err(e) => tracing::error!(error = %e, "reading the console's view failed"),
        }
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = hub.shutdown.cancelled() => {}
        }
        if hub.shutdown.is_cancelled() {
            *feed.running.lock().expect("feed lock") = false;
            return;
        }
        if feed.stop_if_unwatched() {
            return;
        }
    }
}

/// One stream's state between events.
struct Watch {
    hub: Arc<Hub>,
    console: Arc<Console>,
    session: String,
    latest: watch::Receiver<Latest>,
    sent: Option<Sections>,
    done: bool,
    _slot: StreamSlot,
}

fn ended(reason: &str) -> Event {
    Event::default()
        .event("ended")
        .data(json!({ "reason": reason }).to_string())
}

impl Watch {
    /// The next event: the snapshot, a change, or the end.
    async fn next(&mut self) -> Option<Event> {
        loop {
            if self.done {
                return None;
            }
            // Read on each view the stream would send: a logout or an end
            // on another node ends this stream within one poll interval.
            match self.console.sessions.check(&self.session, false).await {
                Ok(Ok(())) => {}
                Ok(Err(why)) => {
                    self.done = true;
                    return Some(ended(why.as_str()));
                }
                Err(e) => {
                    tracing::error!(error = %e, "the console's session could not be read; ending its stream");
                    self.done = true;
                    return Some(ended("unreachable"));
                }
            }
            let current = self.latest.borrow_and_update().clone();
            if let Some(event) = current.and_then(|c| self.event_for(&c)) {
                return Some(event);
            }
            tokio::select! {
                changed = self.latest.changed() => {
                    if changed.is_err() {
                        self.done = true;
                        return Some(ended("shutdown"));
                    }
                }
                _ = self.hub.shutdown.cancelled() => {
                    self.done = true;
                    return Some(ended("shutdown"));
                }
            }
        }
    }

    fn event_for(&mut self, current: &Sections) -> Option<Event> {
        let (name, body) = match &self.sent {
            None => ("snapshot", current.clone()),
            Some(sent) => ("changes", view::changed(sent, current)),
        };
        if body.is_empty() {
            return None;
        }
        self.sent = Some(current.clone());
        Some(
            Event::default()
                .event(name)
                .data(serde_json::Value::Object(body).to_string()),
        )
    }
}

fn events(watch: Watch) -> impl Stream<Item = Result<Event, Infallible>> {
    stream::unfold(watch, |mut w| async move {
        let event = w.next().await?;
        Some((Ok(event), w))
    })
}

pub async fn stream(
    State(hub): State<Arc<Hub>>,
    Extension(console): Extension<Arc<Console>>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let session = operator(&hub, &console, &headers, false).await?;
    let slot = console
        .feed
        .slot(hub.config.console.max_streams)
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "console_streams_full",
                "console.max_streams live views are open; close one",
            )
        })?;
    let latest = console.feed.subscribe(&hub, console.node.clone());
    let watch = Watch {
        hub,
        console,
        session,
        latest,
        sent: None,
        done: false,
        _slot: slot,
    };
    let mut response = Sse::new(events(watch))
        .keep_alive(KeepAlive::default())
        .into_response();
    // A buffering proxy (nginx) would hold the events back.
    response
        .headers_mut()
        .insert("x-accel-buffering", HeaderValue::from_static("no"));
    Ok(response)
}
