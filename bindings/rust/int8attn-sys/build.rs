//! Finds libint8attn and tells cargo how to link it.
//!
//! Search order (first match wins):
//! 1. `INT8ATTN_LIB_DIR`: the directory that contains `libint8attn.so` (or `.dylib`, or
//!    `int8attn.lib` on Windows), e.g. a CMake build tree's `lib/` directory.
//! 2. `INT8ATTN_DIR`: an install prefix; `lib/`, `lib64/` and the multiarch `lib/<triple>/`
//!    below it are tried.
//! 3. `pkg-config --libs int8attn` (the `int8attn.pc` the CMake install writes), run as a
//!    process so that this crate has no build dependencies.
//!
//! `INT8ATTN_STATIC=1` links `libint8attn.a` instead of the shared library (the caller then
//! also has to link the C++ runtime). The directory found is passed on to dependent crates as
//! `DEP_INT8ATTN_LIB_DIR` (cargo's `links` metadata), so they can set an rpath for their tests.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

const ENV_VARS: &[&str] = &["INT8ATTN_LIB_DIR", "INT8ATTN_DIR", "INT8ATTN_STATIC", "PKG_CONFIG_PATH", "PKG_CONFIG"];

fn lib_file_names(target_os: &str, static_link: bool) -> Vec<&'static str> {
    match (target_os, static_link) {
        ("windows", _) => vec!["int8attn.lib"],
        (_, true) => vec!["libint8attn.a"],
        ("macos", false) | ("ios", false) => vec!["libint8attn.dylib"],
        _ => vec!["libint8attn.so"],
    }
}

fn has_library(dir: &Path, names: &[&str]) -> bool {
    names.iter().any(|n| dir.join(n).exists())
}

fn emit_link(dir: &Path, static_link: bool) {
    println!("cargo:rustc-link-search=native={}", dir.display());
    if static_link {
        println!("cargo:rustc-link-lib=static=int8attn");
        // The library is C++ inside.
        let target_os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
        if target_os == "macos" {
            println!("cargo:rustc-link-lib=dylib=c++");
        } else if target_os != "windows" {
            println!("cargo:rustc-link-lib=dylib=stdc++");
            println!("cargo:rustc-link-lib=dylib=pthread");
        }
    } else {
        println!("cargo:rustc-link-lib=dylib=int8attn");
    }
    // Metadata for dependents: DEP_INT8ATTN_LIB_DIR.
    println!("cargo:lib_dir={}", dir.display());
}

fn try_pkg_config(static_link: bool) -> Result<(), String> {
    let pkg_config = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".to_string());
    let mut cmd = Command::new(&pkg_config);
    cmd.arg("--libs");
    if static_link {
        cmd.arg("--static");
    }
    cmd.arg("int8attn");
    let output = cmd
        .output()
        .map_err(|e| format!("could not run `{} --libs int8attn`: {}", pkg_config, e))?;
    if !output.status.success() {
        return Err(format!(
            "`{} --libs int8attn` failed: {}",
            pkg_config,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    let libs = String::from_utf8_lossy(&output.stdout).to_string();
    let mut dirs = Vec::new();
    let mut found_lib = false;
    for tok in libs.split_whitespace() {
        if let Some(d) = tok.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={}", d);
            dirs.push(d.to_string());
        } else if let Some(l) = tok.strip_prefix("-l") {
            if l == "int8attn" {
                found_lib = true;
                let kind = if static_link { "static" } else { "dylib" };
                println!("cargo:rustc-link-lib={}=int8attn", kind);
            } else {
                println!("cargo:rustc-link-lib=dylib={}", l);
            }
        }
    }
    if !found_lib {
        return Err(format!("`{} --libs int8attn` printed no -lint8attn: {}", pkg_config, libs.trim()));
    }
    if let Some(d) = dirs.first() {
        println!("cargo:lib_dir={}", d);
    }
    Ok(())
}

fn main() {
    for v in ENV_VARS {
        println!("cargo:rerun-if-env-changed={}", v);
    }
    println!("cargo:rerun-if-changed=build.rs");

    let target_os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let static_link = matches!(env::var("INT8ATTN_STATIC").as_deref(), Ok("1") | Ok("ON") | Ok("on") | Ok("true"));
    let names = lib_file_names(&target_os, static_link);
    let mut tried: Vec<String> = Vec::new();

    // 1. INT8ATTN_LIB_DIR
    if let Some(dir) = env::var_os("INT8ATTN_LIB_DIR").filter(|s| !s.is_empty()) {
        let dir = PathBuf::from(dir);
        if has_library(&dir, &names) {
            emit_link(&dir, static_link);
            return;
        }
        // An explicit setting that does not work is an error, not a reason to look elsewhere.
        panic!(
            "\n\nint8attn-sys: INT8ATTN_LIB_DIR is set to `{}`, but it contains none of {:?}.\n\
             Set INT8ATTN_LIB_DIR to the directory that holds the built library \
             (for a CMake build: <build dir>/lib), or unset it to search INT8ATTN_DIR and pkg-config.\n",
            dir.display(),
            names
        );
    }
    tried.push("INT8ATTN_LIB_DIR (not set)".into());

    // 2. INT8ATTN_DIR (install prefix)
    if let Some(prefix) = env::var_os("INT8ATTN_DIR").filter(|s| !s.is_empty()) {
        let prefix = PathBuf::from(prefix);
        let mut candidates = vec![prefix.join("lib"), prefix.join("lib64")];
        if let Ok(target) = env::var("TARGET") {
            // Debian-style multiarch directory, e.g. lib/x86_64-linux-gnu.
            let multiarch = target.replace("-unknown-", "-");
            candidates.push(prefix.join("lib").join(multiarch));
        }
        for dir in &candidates {
            if has_library(dir, &names) {
                emit_link(dir, static_link);
                return;
            }
        }
        panic!(
            "\n\nint8attn-sys: INT8ATTN_DIR is set to `{}`, but none of {} contains {:?}.\n\
             Set INT8ATTN_DIR to the prefix int8attn was installed to (cmake --install <build> --prefix <dir>), \
             or set INT8ATTN_LIB_DIR to the directory that holds libint8attn directly.\n",
            prefix.display(),
            candidates.iter().map(|c| c.display().to_string()).collect::<Vec<_>>().join(", "),
            names
        );
    }
    tried.push("INT8ATTN_DIR (not set)".into());

    // 3. pkg-config
    match try_pkg_config(static_link) {
        Ok(()) => return,
        Err(e) => tried.push(format!("pkg-config: {}", e)),
    }

    panic!(
        "\n\nint8attn-sys: could not find the int8attn C library. Tried:\n  - {}\n\n\
         Do one of the following and rebuild:\n\
         \x20 * export INT8ATTN_LIB_DIR=/path/to/dir/containing/libint8attn.so\n\
         \x20   (after `cmake -S . -B build && cmake --build build` this is <repo>/build/lib)\n\
         \x20 * export INT8ATTN_DIR=/install/prefix   (the prefix given to `cmake --install`)\n\
         \x20 * make `pkg-config --libs int8attn` work, e.g. export PKG_CONFIG_PATH=/install/prefix/lib/pkgconfig\n\
         At run time the dynamic loader must find the library too (LD_LIBRARY_PATH, rpath, or a system directory).\n",
        tried.join("\n  - ")
    );
}
