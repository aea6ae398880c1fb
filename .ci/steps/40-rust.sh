#!/usr/bin/env bash
# Rust bindings (bindings/rust): build the C library (CPU only, in build-ci-xlang, shared with
# the C# and cross-language steps), run `cargo test --offline` (unit, integration and doc tests
# of int8attn-sys and int8attn) against it, run the examples, check that src/bindings.rs is what
# bindgen generates from the header today, check that int8attn-sys finds an installed library
# through INT8ATTN_DIR and pkg-config, and that it fails with an actionable message when it finds
# none. No crates.io access is needed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
root="$PWD"
if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi

need=()
command -v cargo >/dev/null || need+=(cargo rustc)     # Debian's toolchain when none is installed
command -v bindgen >/dev/null || need+=(bindgen)
dpkg -s libclang-dev >/dev/null 2>&1 || need+=(libclang-dev)
command -v pkg-config >/dev/null || need+=(pkg-config)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}"
  $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
echo "$(cargo --version), $(rustc --version), $(bindgen --version)"

# The CPU-only library build that 50-csharp.sh and 70-cross-language.sh use too (same options):
# one build serves the three binding steps.
build="${root}/build-ci-xlang"
cmake -S . -B "$build" -G Ninja -DINT8ATTN_ENABLE_CUDA=OFF -DINT8ATTN_BUILD_TESTS=OFF \
  -DINT8ATTN_BUILD_TOOLS=OFF -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C "$build" -j"${CMAKE_BUILD_PARALLEL_LEVEL:-2}" int8attn >/dev/null

export INT8ATTN_LIB_DIR="$build/lib"
export LD_LIBRARY_PATH="$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"  # doc tests
export CARGO_TERM_COLOR=never
cd bindings/rust

echo "== cargo test"
cargo test --offline --workspace -j2
echo "== examples"
cargo run --offline -q -j2 -p int8attn --example basic
echo "== rustdoc (warnings are errors)"
RUSTDOCFLAGS="-D warnings" cargo doc --offline -q --no-deps --workspace -j2

echo "== bindgen output is up to date"
int8attn-sys/regen.sh --check

echo "== library discovery"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
export CARGO_TARGET_DIR="$work/target"   # do not disturb the main target dir
unset INT8ATTN_LIB_DIR
INT8ATTN_DIR="$work/prefix" cargo build --offline -q -p int8attn-sys
echo "INT8ATTN_DIR: ok"
pcdir="$(dirname "$(find "$work/prefix" -name int8attn.pc | head -1)")"
PKG_CONFIG_PATH="$pcdir" cargo build --offline -q -p int8attn-sys
echo "pkg-config: ok"
if PKG_CONFIG_PATH=/nonexistent cargo build --offline -q -p int8attn-sys >"$work/log" 2>&1; then
  echo "int8attn-sys built without any way to find the library"; exit 1
fi
grep -q "INT8ATTN_LIB_DIR" "$work/log" && grep -q "INT8ATTN_DIR" "$work/log" \
  || { cat "$work/log"; echo "the failure message does not name the variables to set"; exit 1; }
echo "missing library: actionable error ok"
