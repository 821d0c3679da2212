//! What an instance writes to its standard output and error: a `print`, an interpreter's traceback,
//! a Rust panic message. Cut into lines; an instance serving a plugin writes each line into the
//! plugin's log (through its log budget), a sandboxed one (`describe`, `check-config`, which have
//! no capabilities) keeps its last lines for the error of a call that fails.

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

use crate::plugins::capabilities::{Capabilities, OutputStream as Stream};

/// A line longer than this is cut: what was written so far is a line of its own.
const MAX_LINE: usize = 8 << 10;
/// What a sandboxed instance keeps of its output.
const KEPT_LINES: usize = 64;
const KEPT_BYTES: usize = 16 << 10;

/// Where complete lines go.
enum Sink {
    Log(Arc<Capabilities>, Stream),
    Keep(Arc<Mutex<Tail>>),
}

/// The last lines a sandboxed instance wrote, stdout and stderr together.
#[derive(Default)]
pub(super) struct Tail {
    lines: VecDeque<String>,
    bytes: usize,
}

impl Tail {
    fn push(&mut self, line: String) {
        self.bytes += line.len();
        self.lines.push_back(line);
        while self.lines.len() > KEPT_LINES || (self.bytes > KEPT_BYTES && self.lines.len() > 1) {
            if let Some(old) = self.lines.pop_front() {
                self.bytes -= old.len();
            }
        }
    }

    /// The lines kept, as a suffix for an error message ("" when there are none).
    pub(super) fn suffix(&self) -> String {
        if self.lines.is_empty() {
            return String::new();
        }
        let lines: Vec<&str> = self.lines.iter().map(String::as_str).collect();
        format!("; the plugin wrote:\n{}", lines.join("\n"))
    }
}

/// The bytes of a line still being written, and where finished lines go. A partial line left at
/// the end (the instance dropped) is written as a line of its own.
struct Lines {
    sink: Sink,
    partial: Vec<u8>,
}

impl Lines {
    fn write(&mut self, mut bytes: &[u8]) {
        while let Some(at) = bytes.iter().position(|b| *b == b'\n') {
            self.partial.extend_from_slice(&bytes[..at]);
            self.finish();
            bytes = &bytes[at + 1..];
        }
        self.partial.extend_from_slice(bytes);
        while self.partial.len() >= MAX_LINE {
            let rest = self.partial.split_off(MAX_LINE);
            self.finish();
            self.partial = rest;
        }
    }

    fn finish(&mut self) {
        let raw = std::mem::take(&mut self.partial);
        let line = String::from_utf8_lossy(&raw);
        let line = line.strip_suffix('\r').unwrap_or(&line);
        match &self.sink {
            Sink::Log(capabilities, stream) => capabilities.log().output(*stream, line),
            Sink::Keep(tail) => tail.lock().push(line.to_owned()),
        }
    }
}

impl Drop for Lines {
    fn drop(&mut self) {
        if !self.partial.is_empty() {
            self.finish();
        }
    }
}

/// One of an instance's output streams: every handle the guest opens on it shares its lines.
#[derive(Clone)]
pub(super) struct Output(Arc<Mutex<Lines>>);

impl Output {
    /// The plugin's stdout or stderr, into its log.
    pub(super) fn log(capabilities: Arc<Capabilities>, stream: Stream) -> Self {
        Self::to(Sink::Log(capabilities, stream))
    }

    /// A sandboxed instance's stdout or stderr, kept in `tail`.
    pub(super) fn keep(tail: Arc<Mutex<Tail>>) -> Self {
        Self::to(Sink::Keep(tail))
    }

    fn to(sink: Sink) -> Self {
        Self(Arc::new(Mutex::new(Lines {
            sink,
            partial: Vec::new(),
        })))
    }
}

impl IsTerminal for Output {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for Output {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[async_trait::async_trait]
impl OutputStream for Output {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.0.lock().write(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        // Always ready: lines past the log budget are dropped, not waited for.
        Ok(1 << 20)
    }
}

#[async_trait::async_trait]
impl Pollable for Output {
    async fn ready(&mut self) {}
}

impl AsyncWrite for Output {
    fn poll_write(self: Pin<&mut Self>, _: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.0.lock().write(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(writes: &[&[u8]]) -> Vec<String> {
        let tail = Arc::new(Mutex::new(Tail::default()));
        {
            let out = Output::keep(Arc::clone(&tail));
            let mut a = out.clone();
            let mut b = out.clone();
            for (i, w) in writes.iter().enumerate() {
                let s = if i % 2 == 0 { &mut a } else { &mut b };
                OutputStream::write(s, Bytes::copy_from_slice(w)).unwrap();
            }
        }
        tail.lock().lines.iter().cloned().collect()
    }

    #[test]
    fn output_is_cut_into_lines_across_writes_and_handles() {
        assert_eq!(
            kept(&[
                b"Traceback (most",
                b" recent call last):\r\n  File \"app.py\"\n",
                b"ZeroDivisionError"
            ]),
            [
                "Traceback (most recent call last):",
                "  File \"app.py\"",
                "ZeroDivisionError"
            ],
            "the partial last line is written when the instance is dropped"
        );
        assert_eq!(kept(&[b"a\n\nb\n"]), ["a", "", "b"]);
        assert_eq!(kept(&[b"caf\xc3", b"\xa9 \xff\n"]), ["café \u{fffd}"]);
    }

    #[test]
    fn a_long_line_is_cut_and_the_tail_is_bounded() {
        let long = vec![b'x'; MAX_LINE + 10];
        let lines = kept(&[&long, b"\n"]);
        assert_eq!(lines.iter().map(String::len).collect::<Vec<_>>(), [MAX_LINE, 10]);

        let mut tail = Tail::default();
        for i in 0..(KEPT_LINES + 5) {
            tail.push(format!("line {i}"));
        }
        assert_eq!(tail.lines.len(), KEPT_LINES);
        assert_eq!(tail.lines.front().map(String::as_str), Some("line 5"));
        assert!(
            tail.suffix().starts_with("; the plugin wrote:\nline 5\n"),
            "{}",
            tail.suffix()
        );
        assert_eq!(Tail::default().suffix(), "");
    }
}
