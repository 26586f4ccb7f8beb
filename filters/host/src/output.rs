//! A component's stdout and stderr: always writable, so printing never
//! fails inside the component, but only the first and last few KiB are kept;
//! what falls between is counted and reported as dropped.

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

/// Most bytes one write may carry (what `check-write` grants).
const WRITE_PERMIT: usize = 64 * 1024;

#[derive(Debug, Default)]
struct Kept {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    dropped: usize,
}

/// Shared by stdout and stderr of one call.
#[derive(Debug, Clone)]
pub(crate) struct CappedOutput {
    head_cap: usize,
    tail_cap: usize,
    kept: Arc<Mutex<Kept>>,
}

impl CappedOutput {
    /// Keeps at most `cap` bytes: the first half and the last half.
    pub(crate) fn new(cap: usize) -> Self {
        CappedOutput {
            head_cap: cap / 2,
            tail_cap: cap - cap / 2,
            kept: Arc::new(Mutex::new(Kept::default())),
        }
    }

    fn append(&self, mut bytes: &[u8]) {
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        let room = self.head_cap.saturating_sub(kept.head.len());
        let into_head = room.min(bytes.len());
        kept.head.extend_from_slice(&bytes[..into_head]);
        bytes = &bytes[into_head..];
        if bytes.len() > self.tail_cap {
            let skip = bytes.len() - self.tail_cap;
            kept.dropped = kept.dropped.saturating_add(skip);
            bytes = &bytes[skip..];
        }
        let overflow = (kept.tail.len() + bytes.len()).saturating_sub(self.tail_cap);
        kept.dropped = kept.dropped.saturating_add(overflow);
        kept.tail.drain(..overflow);
        kept.tail.extend(bytes);
    }

    /// What was kept, lossily decoded, with a line saying how many bytes
    /// were dropped in between.
    pub(crate) fn contents(&self) -> (String, usize) {
        let kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        let mut text = String::from_utf8_lossy(&kept.head).into_owned();
        if kept.dropped > 0 {
            if !text.ends_with('\n') && !text.is_empty() {
                text.push('\n');
            }
            text.push_str(&format!(
                "… {} bytes dropped (per-call output cap) …\n",
                kept.dropped
            ));
        }
        let (a, b) = kept.tail.as_slices();
        text.push_str(&String::from_utf8_lossy(&[a, b].concat()));
        (text, kept.dropped)
    }
}

impl IsTerminal for CappedOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for CappedOutput {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for CappedOutput {
    async fn ready(&mut self) {}
}

#[wasmtime_wasi::async_trait]
impl OutputStream for CappedOutput {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.append(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(WRITE_PERMIT)
    }
}

impl AsyncWrite for CappedOutput {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.append(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_head_and_tail_and_counts_the_rest() {
        let out = CappedOutput::new(8);
        out.append(b"ab");
        out.append(b"cdefgh");
        out.append(b"ijkl");
        let (text, dropped) = out.contents();
        assert_eq!(dropped, 4);
        assert_eq!(
            text,
            "abcd\n… 4 bytes dropped (per-call output cap) …\nijkl"
        );
    }

    #[test]
    fn short_output_is_kept_whole() {
        let out = CappedOutput::new(16);
        out.append(b"hello\n");
        assert_eq!(out.contents(), ("hello\n".to_string(), 0));
    }
}
