//! Gives this crate's own tests and examples an rpath to the directory where int8attn-sys found
//! libint8attn (cargo passes it as DEP_INT8ATTN_LIB_DIR), so `cargo test` and `cargo run
//! --example` work without LD_LIBRARY_PATH. Binaries of crates that depend on this one are not
//! affected: they find the library the usual way (system directory, rpath, LD_LIBRARY_PATH).
use std::env;

fn main() {
    println!("cargo:rerun-if-env-changed=DEP_INT8ATTN_LIB_DIR");
    println!("cargo:rerun-if-changed=build.rs");
    let target_os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if target_os == "windows" {
        return;
    }
    if let Ok(dir) = env::var("DEP_INT8ATTN_LIB_DIR") {
        if !dir.is_empty() {
            // Applies to this package's linked targets only: its unit and integration tests
            // and its examples (the crate itself is an rlib and links nothing).
            println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir);
        }
    }
}
