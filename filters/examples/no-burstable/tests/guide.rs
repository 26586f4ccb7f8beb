//! `docs/authoring-filters.md` shows this crate's code: every Rust block of
//! the guide must appear verbatim in one of its files, so what the guide
//! shows is what `cargo test --workspace` compiles and runs.

use std::path::Path;

/// The ```rust blocks of a Markdown text.
fn rust_blocks(markdown: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in markdown.lines() {
        match (&mut current, line.trim_end()) {
            (None, "```rust") => current = Some(String::new()),
            (Some(block), "```") => {
                blocks.push(std::mem::take(block));
                current = None;
            }
            (Some(block), _) => {
                block.push_str(line);
                block.push('\n');
            }
            (None, _) => {}
        }
    }
    blocks
}

#[test]
fn every_rust_block_of_the_guide_is_in_this_crate() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let read = |relative: &str| std::fs::read_to_string(root.join(relative)).unwrap();
    let guide = read("../../../docs/authoring-filters.md");
    let sources = [read("src/lib.rs"), read("tests/harness.rs")];
    let blocks = rust_blocks(&guide);
    assert!(blocks.len() >= 3, "the guide lost its code: {blocks:?}");
    for block in &blocks {
        assert!(
            sources.iter().any(|source| source.contains(block.as_str())),
            "this block of docs/authoring-filters.md is not in filters/examples/no-burstable \
             (copy it there, or the crate's code into the guide):\n{block}"
        );
    }
}

#[test]
fn blocks_are_found() {
    let markdown = "text\n```rust\nfn a() {}\n```\n```toml\nx = 1\n```\n```rust\nfn b() {}\n```\n";
    assert_eq!(rust_blocks(markdown), ["fn a() {}\n", "fn b() {}\n"]);
}
