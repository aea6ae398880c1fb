#!/usr/bin/env bash
# C# bindings (bindings/csharp) under Debian's Mono: compile the library, the NUnit test assembly
# (against Debian's NUnit 2.6) and the missing-library probe straight from the .cs files with mcs
# (no NuGet), then run the tests with nunit-console against the CPU backend, once through
# INT8ATTN_LIBRARY and once through LD_LIBRARY_PATH + the dllmap. The .csproj files are for the
# .NET SDK and are not used here.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
root="$PWD"
if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
if ! command -v mcs >/dev/null || ! command -v mono >/dev/null; then
  echo "installing mono-devel"
  $SUDO apt-get install -y -qq --no-install-recommends mono-devel >/dev/null
fi
if ! command -v nunit-console >/dev/null || ! pkg-config --exists nunit; then
  echo "installing nunit-console and libnunit-cil-dev"
  $SUDO apt-get install -y -qq --no-install-recommends nunit-console libnunit-cil-dev >/dev/null
fi
echo "mono: $(mono --version | head -1)"
# The framework assembly the tests compile against (pkg-config lists all of NUnit's assemblies).
nunit_framework=$(pkg-config --libs nunit | tr ' ' '\n' | sed -n 's/^-r://p' | grep '/nunit\.framework\.dll$' | head -1)
[ -f "$nunit_framework" ] || { echo "nunit.framework.dll not found (pkg-config --libs nunit)"; exit 1; }
echo "nunit: $nunit_framework"

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
mcs -nologo -target:library -unsafe -warnaserror+ -out:"$out/Int8Attn.Tests.dll" \
  -r:"$out/Int8Attn.dll" -r:"$nunit_framework" bindings/csharp/tests/Int8Attn.Tests/*.cs
mcs -nologo -warnaserror+ -out:"$out/Int8Attn.MissingLibraryProbe.exe" -r:"$out/Int8Attn.dll" \
  bindings/csharp/tests/Int8Attn.MissingLibraryProbe/Program.cs

# nunit-console exits non-zero if a test fails or errs. -noshadow: run the assemblies where they
# are, next to Int8Attn.dll.config (the dllmap) and the probe. The XML results go to $out.
export INT8ATTN_ABI_BASELINE="$root/tests/abi/int8attn_abi_baseline.inc"
run_tests() {  # NAME: the run's label and the name of its XML result file
  nunit-console -nologo -noshadow -labels -result="$out/TestResult-$1.xml" "$out/Int8Attn.Tests.dll"
}
echo "== tests, library from INT8ATTN_LIBRARY"
INT8ATTN_LIBRARY="$build/lib/libint8attn.so" run_tests library-env
echo "== tests, library from LD_LIBRARY_PATH (dllmap to the soname)"
LD_LIBRARY_PATH="$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" run_tests ld-library-path
