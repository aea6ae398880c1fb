#!/usr/bin/env bash
# C# bindings (bindings/csharp) under Debian's Mono: compile the library and the test program
# straight from the .cs files with mcs (no NuGet), then run the tests against the CPU backend,
# once through INT8ATTN_LIBRARY and once through LD_LIBRARY_PATH + the dllmap. The .csproj files
# are for the .NET SDK and are not used here.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
root="$PWD"
if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
if ! command -v mcs >/dev/null || ! command -v mono >/dev/null; then
  echo "installing mono-devel"
  $SUDO apt-get install -y -qq --no-install-recommends mono-devel >/dev/null
fi
echo "mono: $(mono --version | head -1)"

# The library, CPU only: the build of 40-rust.sh, shared with the cross-language step (same
# options, so this is a no-op after 40-rust.sh).
build="${root}/build-ci-xlang"
cmake -S . -B "$build" -G Ninja -DINT8ATTN_ENABLE_CUDA=OFF -DINT8ATTN_BUILD_TESTS=OFF \
  -DINT8ATTN_BUILD_TOOLS=OFF -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C "$build" -j"${CMAKE_BUILD_PARALLEL_LEVEL:-2}" int8attn >/dev/null

out="$build/csharp"
rm -rf "$out" && mkdir -p "$out"
mcs -nologo -target:library -unsafe -warnaserror+ -doc:"$out/Int8Attn.xml" -out:"$out/Int8Attn.dll" \
  bindings/csharp/src/Int8Attn/*.cs
cp bindings/csharp/src/Int8Attn/Int8Attn.dll.config "$out/"
mcs -nologo -unsafe -out:"$out/Int8Attn.Tests.exe" -r:"$out/Int8Attn.dll" \
  bindings/csharp/tests/Int8Attn.Tests/Program.cs

echo "== tests, library from INT8ATTN_LIBRARY"
INT8ATTN_LIBRARY="$build/lib/libint8attn.so" mono "$out/Int8Attn.Tests.exe" tests/abi/int8attn_abi_baseline.inc
echo "== tests, library from LD_LIBRARY_PATH (dllmap to the soname)"
LD_LIBRARY_PATH="$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
  mono "$out/Int8Attn.Tests.exe" tests/abi/int8attn_abi_baseline.inc
