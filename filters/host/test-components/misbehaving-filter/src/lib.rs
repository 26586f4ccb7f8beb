//! An instance filter whose behaviour is chosen by `config.mode`, so the
//! host's tests can provoke every failure the sandbox must contain.

use nodewright_filter::{Context, InstanceFilter, InstanceType, LogLevel, Verdict};

mod hostile;

/// Behaves as `config.mode` says.
#[derive(Default)]
pub struct Misbehaving;

/// `config.seconds`, for the sleeping modes (default: one hour).
fn seconds(ctx: &Context) -> u64 {
    ctx.config::<serde_json::Value>()
        .ok()
        .and_then(|v| v.get("seconds").and_then(serde_json::Value::as_u64))
        .unwrap_or(3600)
}

/// Recurses until the stack runs out.
fn deep(n: u64) -> u64 {
    if n == u64::MAX {
        return 0;
    }
    let frame = std::hint::black_box([n; 32]);
    deep(n + 1).wrapping_add(frame[31])
}

fn mode(ctx: &Context) -> String {
    ctx.config::<serde_json::Value>()
        .ok()
        .and_then(|v| v.get("mode").and_then(|m| m.as_str()).map(str::to_string))
        .unwrap_or_default()
}

impl InstanceFilter for Misbehaving {
    fn filter(
        &self,
        ctx: &Context,
        candidates: &[InstanceType<'_>],
    ) -> Result<Vec<Verdict>, String> {
        let mode = mode(ctx);
        if let Some(answer) = hostile::run(&mode, ctx, candidates) {
            return answer;
        }
        match mode.as_str() {
            "loop" => {
                let mut n: u64 = 0;
                loop {
                    n = std::hint::black_box(n.wrapping_add(1));
                }
            }
            "alloc" => {
                let big = vec![1u8; 1 << 30];
                Ok(vec![
                    Verdict::drop(format!(
                        "{}",
                        big.iter().map(|&b| u64::from(b)).sum::<u64>()
                    ));
                    candidates.len()
                ])
            }
            "panic" => panic!("deliberate panic for the sandbox test"),
            "wrong-length" => Ok(vec![Verdict::Keep; candidates.len() + 1]),
            "long-reason" => Ok(vec![Verdict::drop("x".repeat(10_000)); candidates.len()]),
            "error" => Err("the filter refuses this input".to_string()),
            "clocks" => {
                let wall = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos())
                    .unwrap_or(0);
                let mono = std::time::Instant::now();
                use std::hash::{BuildHasher, Hasher};
                let mut h = std::collections::hash_map::RandomState::new().build_hasher();
                h.write_u64(42);
                let random = h.finish();
                let reason = format!("wall={wall} mono={mono:?} random={random}");
                Ok(vec![Verdict::drop(reason); candidates.len()])
            }
            "log" => {
                nodewright_filter::log(
                    LogLevel::Info,
                    &format!("looked at {} candidates", candidates.len()),
                );
                Ok(vec![Verdict::Keep; candidates.len()])
            }
            "sleep" => {
                std::thread::sleep(std::time::Duration::from_secs(seconds(ctx)));
                Ok(vec![Verdict::Keep; candidates.len()])
            }
            "sleep-loop" => loop {
                std::thread::sleep(std::time::Duration::from_millis(1));
            },
            "virtual-time" => {
                let start = std::time::Instant::now();
                std::thread::sleep(std::time::Duration::from_millis(20));
                let slept = start.elapsed().as_millis();
                Ok(vec![
                    Verdict::drop(format!("slept {slept} ms"));
                    candidates.len()
                ])
            }
            "print" => {
                for i in 0..1000 {
                    println!("debug line {i}: looking at {} candidates", candidates.len());
                }
                Ok(vec![Verdict::Keep; candidates.len()])
            }
            "print-then-panic" => {
                for i in 0..1000 {
                    eprintln!("debug line {i}");
                }
                panic!("deliberate panic after a lot of output")
            }
            "huge-error" => {
                // 40 MiB, built in place to stay under the 64 MiB memory cap.
                let mut message = String::with_capacity((40 << 20) + 32);
                message.push_str("\u{1b}[31mbad\nconfig\r");
                message.extend(std::iter::repeat_n('e', 40 << 20));
                Err(message)
            }
            "control-reason" => Ok(vec![
                Verdict::drop("line one\nline two\u{1b}[0m");
                candidates.len()
            ]),
            "stack-overflow" => Ok(vec![Verdict::drop(deep(0).to_string()); candidates.len()]),
            "name-length" => Ok(candidates
                .iter()
                .map(|c| {
                    if c.name().len() > 10 {
                        Verdict::drop(format!("{} has a long name", c.name()))
                    } else {
                        Verdict::Keep
                    }
                })
                .collect()),
            _ => Ok(vec![Verdict::Keep; candidates.len()]),
        }
    }
}

nodewright_filter::export_instance_filter!(Misbehaving);
