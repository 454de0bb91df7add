//! A run's capped log (ADR 0031 §3): the stdout and stderr readers fill
//! one buffer up to `hosted.output_max_bytes` (the bytes past it end the
//! run), and the live copy's writer keeps the last
//! `hosted.live_log_max_bytes` of it on the run's row while the run lives.
//! The writer is its own task fed by a `watch` channel, so the supervise
//! loop, which also watches the child, the deadline, stops and memory,
//! never waits on the store for the log, and a slow write only coalesces
//! the next ones into one.

use std::sync::{Arc, Mutex};

use tokio::io::AsyncReadExt;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::hub::Hub;

/// The capped per-run log, shared by the stdout and stderr readers.
pub struct Log {
    bytes: Mutex<Vec<u8>>,
    cap: usize,
    /// Cancelled when the child wrote past the cap.
    pub over: CancellationToken,
}

impl Log {
    pub fn new(cap: usize) -> Arc<Log> {
        Arc::new(Log {
            bytes: Mutex::new(Vec::new()),
            cap,
            over: CancellationToken::new(),
        })
    }

    /// Keeps what fits under the cap; more ends the run (`over`).
    fn take(&self, chunk: &[u8]) {
        let mut bytes = self.bytes.lock().expect("log lock");
        let room = self.cap.saturating_sub(bytes.len());
        bytes.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if chunk.len() > room {
            self.over.cancel();
        }
    }

    pub fn len(&self) -> usize {
        self.bytes.lock().expect("log lock").len()
    }

    /// The log's length and its last `max` bytes, starting on a character
    /// boundary when the log is UTF-8 (a cut inside a character would read
    /// as a replacement character): the live copy.
    fn tail(&self, max: usize) -> (usize, Vec<u8>) {
        let bytes = self.bytes.lock().expect("log lock");
        let len = bytes.len();
        let cut = len.saturating_sub(max);
        // A character has at most three continuation bytes. Nothing cut,
        // nothing skipped: a log starting mid-character is kept whole.
        let start = match cut {
            0 => 0,
            _ => (cut..len.min(cut + 4))
                .find(|&i| !is_continuation(bytes[i]))
                .unwrap_or(cut),
        };
        (len, bytes[start..].to_vec())
    }

    /// The whole log, once the readers are done: what `finish` stores.
    pub fn take_all(&self) -> Vec<u8> {
        std::mem::take(&mut *self.bytes.lock().expect("log lock"))
    }
}

/// A UTF-8 continuation byte (`10xxxxxx`): not a character's first byte.
fn is_continuation(b: u8) -> bool {
    b & 0xC0 == 0x80
}

/// Reads one of the child's pipes into the log until it closes.
pub fn reader(
    log: Arc<Log>,
    pipe: Option<impl AsyncReadExt + Unpin + Send + 'static>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let Some(mut pipe) = pipe else { return };
        let mut buf = vec![0u8; 8192];
        while let Ok(n) = pipe.read(&mut buf).await {
            if n == 0 {
                return;
            }
            log.take(&buf[..n]);
        }
    })
}

/// The live copy's writer task and the channel that feeds it.
pub struct LiveLog {
    grown: watch::Sender<usize>,
    task: JoinHandle<()>,
}

impl LiveLog {
    /// Starts the writer of `run`'s live copy: at most its last `max`
    /// bytes of `log`.
    pub fn start(hub: Arc<Hub>, run: Uuid, log: Arc<Log>, max: usize) -> LiveLog {
        let (grown, rx) = watch::channel(0);
        let task = tokio::spawn(write_live(hub, run, log, max, rx));
        LiveLog { grown, task }
    }

    /// Tells the writer the log's length now; never waits. Sent on every
    /// control tick, changed or not, so a write that failed is tried again
    /// on the next one; the writer skips a length it stored already.
    pub fn grew(&self, len: usize) {
        self.grown.send_replace(len);
    }

    /// Closes the channel and waits for the write in flight, if any, so
    /// no live write can land after `finish` stores the whole log. (The
    /// store's write also touches only a live row, a second guard.)
    pub async fn stop(self) {
        drop(self.grown);
        if let Err(e) = self.task.await {
            tracing::error!(error = %e, "hosted run: the live log writer failed");
        }
    }
}

/// Writes the latest tail each time the log's length is sent, until the
/// channel closes; sends that came during a write make one write after it.
async fn write_live(
    hub: Arc<Hub>,
    run: Uuid,
    log: Arc<Log>,
    max: usize,
    mut grown: watch::Receiver<usize>,
) {
    let mut written = 0;
    while grown.changed().await.is_ok() && !grown.is_closed() {
        let (len, tail) = log.tail(max);
        if len == written {
            continue;
        }
        match hub.store.write_run_log(run, hub.runs.owner(), &tail).await {
            Ok(()) => written = len,
            // Tried again with the next tick's send.
            Err(e) => {
                tracing::warn!(run = %run, error = %e, "hosted run: the live log was not stored")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log_of(cap: usize, chunks: &[&[u8]]) -> Arc<Log> {
        let log = Log::new(cap);
        for c in chunks {
            log.take(c);
        }
        log
    }

    #[test]
    fn the_log_keeps_its_cap_and_marks_what_went_over() {
        let log = log_of(5, &[b"abc", b"de"]);
        assert!(!log.over.is_cancelled());
        log.take(b"f");
        assert!(log.over.is_cancelled());
        assert_eq!(log.take_all(), b"abcde");
    }

    #[test]
    fn the_tail_is_the_last_bytes_and_the_length_the_whole() {
        let log = log_of(100, &[b"0123456789"]);
        assert_eq!(log.tail(4), (10, b"6789".to_vec()));
        assert_eq!(log.tail(50), (10, b"0123456789".to_vec()));
        assert_eq!(log.len(), 10);
    }

    #[test]
    fn the_tail_starts_on_a_character() {
        // "aé€" is 61 C3 A9 E2 82 AC; a cut inside a character moves past
        // its continuation bytes.
        let log = log_of(100, &["aé€".as_bytes()]);
        assert_eq!(log.tail(3), (6, "€".as_bytes().to_vec()));
        assert_eq!(log.tail(4), (6, "€".as_bytes().to_vec()));
        assert_eq!(log.tail(5), (6, "é€".as_bytes().to_vec()));
        // "😀b" is F0 9F 98 80 62: three continuation bytes skipped.
        let four = log_of(100, &["😀b".as_bytes()]);
        assert_eq!(four.tail(4).1, b"b");
        // Not UTF-8 (more than three continuation bytes): the cut stays.
        let raw = log_of(100, &[&[0x80; 8]]);
        assert_eq!(raw.tail(5).1, vec![0x80; 5]);
        // Nothing cut: kept whole, even starting on a continuation byte.
        let whole = log_of(100, &[&[0x80, b'a']]);
        assert_eq!(whole.tail(10).1, vec![0x80, b'a']);
    }
}
