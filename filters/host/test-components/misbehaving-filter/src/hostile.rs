//! Modes for the hostile-component tests: slow memory growth, huge answers,
//! reads of the environment, blocking host calls, state kept across calls
//! and leftovers in recycled memory.

use std::sync::atomic::{AtomicU32, Ordering};

use nodewright_filter::{Context, InstanceType, Verdict};

/// A number from `config`, or `default`.
fn number(ctx: &Context, key: &str, default: u64) -> u64 {
    ctx.config::<serde_json::Value>()
        .ok()
        .and_then(|v| v.get(key).and_then(serde_json::Value::as_u64))
        .unwrap_or(default)
}

fn usize_of(ctx: &Context, key: &str, default: usize) -> usize {
    usize::try_from(number(ctx, key, default as u64)).unwrap_or(usize::MAX)
}

/// Pages of 64 KiB that `grow-pages` and `check-pages` take.
#[cfg(target_arch = "wasm32")]
const RAW_PAGES: usize = 512;

/// Calls answered by this instance so far.
static CALLS: AtomicU32 = AtomicU32::new(0);

/// Answers a hostile mode, or `None` when `mode` is not one of them.
pub fn run(
    mode: &str,
    ctx: &Context,
    candidates: &[InstanceType<'_>],
) -> Option<Result<Vec<Verdict>, String>> {
    let n = candidates.len();
    let answer = match mode {
        // Grows the heap 64 KiB at a time, keeping every chunk, until it
        // holds `bytes` bytes.
        "grow" => {
            let target = usize_of(ctx, "bytes", 1 << 30);
            let mut chunks: Vec<Box<[u8]>> = Vec::new();
            let mut held = 0usize;
            while held < target {
                chunks.push(vec![1u8; 64 * 1024].into_boxed_slice());
                held += 64 * 1024;
            }
            let sum: u64 = chunks.iter().map(|c| u64::from(c[0])).sum();
            Ok(vec![Verdict::drop(format!("held {sum} chunks")); n])
        }
        // `count` verdicts for any number of candidates.
        "many-verdicts" => Ok(vec![Verdict::Keep; usize_of(ctx, "count", 1_000_000)]),
        // `count` drop verdicts, each with its own short string.
        "many-drops" => Ok((0..usize_of(ctx, "count", 1_000_000))
            .map(|i| Verdict::drop(format!("{}", i % 10)))
            .collect()),
        // One drop reason of `bytes` bytes.
        "giant-reason" => {
            let mut reasons = vec![Verdict::Keep; n];
            if let Some(first) = reasons.first_mut() {
                *first = Verdict::drop("r".repeat(usize_of(ctx, "bytes", 32 << 20)));
            }
            Ok(reasons)
        }
        // A panic whose message is `bytes` bytes.
        "huge-panic" => {
            let message = "p".repeat(usize_of(ctx, "bytes", 10 << 20));
            panic!("{message}")
        }
        // What the environment, the arguments and stdin hold.
        "environment" => {
            use std::io::Read;
            let vars: Vec<String> = std::env::vars_os()
                .map(|(k, v)| format!("{}={}", k.to_string_lossy(), v.to_string_lossy()))
                .collect();
            let args = std::env::args_os().count();
            let mut stdin = Vec::new();
            let read = std::io::stdin().read_to_end(&mut stdin);
            let home = std::env::var("HOME").ok();
            Ok(vec![
                Verdict::drop(format!(
                    "vars={vars:?} args={args} home={home:?} stdin={} read={}",
                    stdin.len(),
                    read.is_ok()
                ));
                n
            ])
        }
        // Counts this instance's calls and traps past the 1,000th: a host
        // that reused instances would see the trap on call 1,001.
        "count-calls" => {
            let call = CALLS.fetch_add(1, Ordering::Relaxed) + 1;
            if call > 1000 {
                panic!("call {call}: state survived from earlier calls")
            }
            Ok(vec![Verdict::drop(format!("call {call}")); n])
        }
        "grow-pages" => raw_pages(true).map(|count| vec![Verdict::drop(count); n]),
        "check-pages" => raw_pages(false).map(|count| vec![Verdict::drop(count); n]),
        _ => return blocking(mode, n),
    };
    Some(answer)
}

/// Grows linear memory by [`RAW_PAGES`] pages outside the allocator and
/// either fills them with 0xA5 (`dirty`) or counts their non-zero bytes: a
/// recycled memory slot must come back zeroed.
#[cfg(target_arch = "wasm32")]
fn raw_pages(dirty: bool) -> Result<String, String> {
    let old = core::arch::wasm32::memory_grow(0, RAW_PAGES);
    if old == usize::MAX {
        return Err("memory.grow refused".to_string());
    }
    let base = old * 64 * 1024;
    let len = RAW_PAGES * 64 * 1024;
    let mut nonzero = 0usize;
    for offset in 0..len {
        let p = (base + offset) as *mut u8;
        // SAFETY: the pages were just added by memory.grow above and belong
        // to no Rust object; the allocator never hands them out.
        unsafe {
            if dirty {
                p.write_volatile(0xA5);
            } else if p.read_volatile() != 0 {
                nonzero += 1;
            }
        }
    }
    Ok(format!(
        "{nonzero} non-zero bytes in {RAW_PAGES} fresh pages"
    ))
}

#[cfg(not(target_arch = "wasm32"))]
fn raw_pages(_dirty: bool) -> Result<String, String> {
    Err("only meaningful in wasm32".to_string())
}

/// Modes that block in host calls.
#[cfg(target_arch = "wasm32")]
fn blocking(mode: &str, n: usize) -> Option<Result<Vec<Verdict>, String>> {
    use wasip2::{cli, clocks::monotonic_clock, io::poll};
    let answer = match mode {
        // Waits for the end of time on the monotonic clock.
        "wait-forever" => {
            monotonic_clock::subscribe_instant(u64::MAX).block();
            Ok(vec![Verdict::Keep; n])
        }
        // Polls a clock that never fires together with stdin.
        "poll-forever" => {
            let never = monotonic_clock::subscribe_duration(u64::MAX);
            let stdin = cli::stdin::get_stdin();
            let ready = poll::poll(&[&never, &stdin.subscribe()]);
            Ok(vec![Verdict::drop(format!("ready {ready:?}")); n])
        }
        // Polls nothing at all.
        "poll-nothing" => {
            let ready = poll::poll(&[]);
            Ok(vec![Verdict::drop(format!("ready {ready:?}")); n])
        }
        // Blocking reads of stdin, forever.
        "read-stdin-forever" => {
            let stdin = cli::stdin::get_stdin();
            loop {
                let _ = std::hint::black_box(stdin.blocking_read(4096));
            }
        }
        // Blocking writes of stdout, forever.
        "write-stdout-forever" => {
            let stdout = cli::stdout::get_stdout();
            let line = [b'w'; 4096];
            loop {
                let _ = std::hint::black_box(stdout.blocking_write_and_flush(&line));
            }
        }
        _ => return None,
    };
    Some(answer)
}

#[cfg(not(target_arch = "wasm32"))]
fn blocking(_mode: &str, _n: usize) -> Option<Result<Vec<Verdict>, String>> {
    None
}
