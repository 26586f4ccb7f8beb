//! Embeds the WIT contract into a macro so that the export macros can run
//! `wit_bindgen::generate!` inside the author's crate. Generating the
//! bindings there (rather than in this crate) keeps each component's type
//! section limited to the one world it implements.
//!
//! The contract is read from `wit/` inside this package (in the source tree a
//! link to the workspace's `wit/`), so the published crate carries it too.

use std::{env, fs, path::PathBuf};

fn main() {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let wit_path = manifest.join("wit/filters.wit");
    println!("cargo:rerun-if-changed={}", wit_path.display());
    let wit = match fs::read_to_string(&wit_path) {
        Ok(text) => text,
        Err(e) => panic!(
            "cannot read the WIT contract at {}: {e}",
            wit_path.display()
        ),
    };
    if wit.contains("\"###") {
        panic!(
            "the WIT contract must not contain the sequence \"### (it is embedded in a raw string)"
        );
    }
    let out = PathBuf::from(env::var_os("OUT_DIR").unwrap_or_default()).join("generate_macro.rs");
    let text = format!(
        "/// Runs `wit_bindgen::generate!` for one world of the embedded contract.\n\
         #[doc(hidden)]\n\
         #[macro_export]\n\
         macro_rules! __nodewright_generate {{\n\
         ($world:literal) => {{\n\
         $crate::__wit_bindgen::generate!({{\n\
         inline: r###\"{wit}\"###,\n\
         world: $world,\n\
         runtime_path: \"::nodewright_filter::__wit_bindgen::rt\",\n\
         }});\n\
         }};\n\
         }}\n\
         /// The WIT contract this SDK speaks.\n\
         pub const WIT: &str = r###\"{wit}\"###;\n"
    );
    if let Err(e) = fs::write(&out, text) {
        panic!("cannot write {}: {e}", out.display());
    }
}
