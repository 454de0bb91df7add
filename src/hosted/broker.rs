//! One run's capability broker (ADR 0031 §5): reads request lines from the
//! run's private channel, checks each in the ADR's order, serves the
//! granted primitives as the app, and answers one line per request, in
//! order.

use std::collections::BTreeSet;

use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

use super::calls::Caller;
use crate::domain::hosted::primitives::{self, ParamBounds};
use crate::domain::hosted::wire::{self, ErrorCode, Failure, Grant};

/// What the broker of one run holds. The token lives here only.
pub struct Broker {
    pub token: [u8; 32],
    pub methods: BTreeSet<&'static str>,
    pub max_line: usize,
    pub bounds: ParamBounds,
    pub caller: Caller,
}

/// A line read under the cap.
enum Line {
    Full(Vec<u8>),
    TooLong,
    End,
}

/// Reads up to the next newline, keeping at most `max` bytes; a longer
/// line is consumed to its end and reported `TooLong`.
async fn read_line(r: &mut (impl AsyncBufRead + Unpin), max: usize) -> std::io::Result<Line> {
    let mut line = Vec::new();
    let mut too_long = false;
    loop {
        let buf = r.fill_buf().await?;
        if buf.is_empty() {
            return Ok(if line.is_empty() && !too_long {
                Line::End
            } else if too_long {
                Line::TooLong
            } else {
                Line::Full(line)
            });
        }
        let (chunk, found) = match buf.iter().position(|b| *b == b'\n') {
            Some(i) => (&buf[..i], Some(i + 1)),
            None => (buf, None),
        };
        if !too_long {
            if line.len() + chunk.len() > max {
                too_long = true;
                line = Vec::new();
            } else {
                line.extend_from_slice(chunk);
            }
        }
        let used = found.unwrap_or(buf.len());
        r.consume(used);
        if found.is_some() {
            return Ok(if too_long {
                Line::TooLong
            } else {
                Line::Full(line)
            });
        }
    }
}

impl Broker {
    /// Serves the channel until the child closes it (or the run ends and
    /// drops this future).
    pub async fn serve(self, stream: UnixStream) -> std::io::Result<()> {
        let (read, mut write) = stream.into_split();
        let mut reader = BufReader::new(read);
        loop {
            let answer = match read_line(&mut reader, self.max_line).await? {
                Line::End => return Ok(()),
                Line::TooLong => Failure::new(
                    Value::Null,
                    ErrorCode::TooLarge,
                    format!(
                        "a request line is at most {} bytes (hosted.broker_max_line_bytes)",
                        self.max_line
                    ),
                )
                .line(),
                Line::Full(line) if line.iter().all(u8::is_ascii_whitespace) => continue,
                Line::Full(line) => self.answer(&line).await,
            };
            write.write_all(&answer).await?;
        }
    }

    async fn answer(&self, line: &[u8]) -> Vec<u8> {
        let grant = Grant {
            token: &self.token,
            methods: &self.methods,
        };
        let call = match wire::read_request(line, &grant) {
            Ok(call) => call,
            Err(f) => return f.line(),
        };
        let params = match primitives::decode(call.primitive, call.params, &self.bounds) {
            Ok(p) => p,
            Err(m) => return Failure::new(call.id, ErrorCode::BadRequest, m).line(),
        };
        match self.caller.serve(&call.id, params).await {
            Ok(text) => wire::ok_line(&call.id, &text),
            Err(f) => f.line(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn lines(input: &[u8], max: usize) -> Vec<&'static str> {
        let mut r = BufReader::with_capacity(4, input);
        let mut out = Vec::new();
        loop {
            match read_line(&mut r, max).await.unwrap() {
                Line::End => return out,
                Line::TooLong => out.push("long"),
                Line::Full(l) => out.push(if l.is_empty() { "empty" } else { "ok" }),
            }
        }
    }

    #[tokio::test]
    async fn a_long_line_is_skipped_and_the_next_read() {
        assert_eq!(lines(b"abc\n", 3).await, ["ok"]);
        assert_eq!(lines(b"abcd\nab\n", 3).await, ["long", "ok"]);
        assert_eq!(lines(b"abcdefghij", 3).await, ["long"]);
        assert_eq!(lines(b"\nab", 3).await, ["empty", "ok"]);
    }
}
