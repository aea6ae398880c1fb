#!/usr/bin/env bash
# Run the cross-language check (README.md): build the C library with CUDA off if needed, run the C,
# Python, Rust and C# participants against that one library, and compare their outputs.
#
#   tests/cross_language/run.sh [BUILD_DIR]      (default: build-ci-xlang)
#
# Needs cc, python3 (+ numpy; a venv is made if missing), cargo, mono-devel (mcs). Set
# XLANG_ALLOW_MISSING=1 to skip languages whose toolchain is missing instead of failing.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "${root}"
build="${1:-build-ci-xlang}"
case "${build}" in /*) ;; *) build="${root}/${build}" ;; esac
here="${root}/tests/cross_language"
out="${build}/xlang-out"

if [ ! -e "${build}/lib/libint8attn.so" ]; then
  echo "== building libint8attn (CUDA off) in ${build}"
  cmake -S "${root}" -B "${build}" -G Ninja -DINT8ATTN_ENABLE_CUDA=OFF -DINT8ATTN_BUILD_TESTS=OFF \
    -DINT8ATTN_BUILD_TOOLS=OFF -DCMAKE_BUILD_TYPE=Release >/dev/null
  ninja -C "${build}" -j"${XLANG_JOBS:-2}" int8attn >/dev/null
fi
lib="${build}/lib"
rm -rf "${out}" && mkdir -p "${out}"
langs=()

missing() {
  if [ "${XLANG_ALLOW_MISSING:-0}" = 1 ]; then
    echo "== $1: skipped ($2)"
  else
    echo "== $1: $2 (set XLANG_ALLOW_MISSING=1 to skip)" >&2
    exit 1
  fi
}

echo "== C"
cc -std=c99 -O2 -Wall -Wextra -I"${root}/include" "${here}/xlang.c" -L"${lib}" -lint8attn \
  -Wl,-rpath,"${lib}" -o "${build}/xlang_c"
"${build}/xlang_c" "${out}"
langs+=(c)

echo "== Python"
py=""
for cand in "${INT8ATTN_CI_VENV:-}" "${root}/build-ci/py-venv" "${build}/xlang-venv"; do
  if [ -n "${cand}" ] && [ -x "${cand}/bin/python" ] && "${cand}/bin/python" -c "import numpy" 2>/dev/null; then
    py="${cand}/bin/python"; break
  fi
done
if [ -z "${py}" ] && python3 -c "import numpy" 2>/dev/null; then py="python3"; fi
if [ -z "${py}" ]; then
  python3 -m venv "${build}/xlang-venv" && "${build}/xlang-venv/bin/python" -m pip install -q numpy \
    && py="${build}/xlang-venv/bin/python"
fi
if [ -n "${py}" ]; then
  INT8ATTN_LIBRARY="${lib}/libint8attn.so" PYTHONPATH="${root}/bindings/python/src" \
    "${py}" "${here}/xlang.py" "${out}"
  langs+=(python)
else
  missing Python "no python3 with numpy"
fi

echo "== Rust"
if command -v cargo >/dev/null; then
  INT8ATTN_LIB_DIR="${lib}" LD_LIBRARY_PATH="${lib}${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}" \
    cargo run --offline -q --manifest-path "${root}/bindings/rust/Cargo.toml" -p int8attn \
    --example cross_language -- "${out}"
  langs+=(rust)
else
  missing Rust "cargo not found"
fi

echo "== C#"
if command -v mcs >/dev/null && command -v mono >/dev/null; then
  cs="${build}/xlang-cs"
  mkdir -p "${cs}"
  mcs -nologo -target:library -unsafe -out:"${cs}/Int8Attn.dll" "${root}"/bindings/csharp/src/Int8Attn/*.cs
  cp "${root}/bindings/csharp/src/Int8Attn/Int8Attn.dll.config" "${cs}/"
  mcs -nologo -out:"${cs}/xlang.exe" -r:"${cs}/Int8Attn.dll" "${here}/xlang.cs"
  INT8ATTN_LIBRARY="${lib}/libint8attn.so" mono "${cs}/xlang.exe" "${out}"
  langs+=(csharp)
else
  missing C# "mono/mcs not found (apt-get install mono-devel)"
fi

echo "== compare"
python3 "${here}/compare.py" "${out}" "${langs[@]}"
