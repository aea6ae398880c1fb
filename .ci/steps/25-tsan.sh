#!/usr/bin/env bash
# clang: the CPU library builds with clang (Release, warnings as errors: clang 14 once rejected
# the CPU feature check in src/cpu/kernels.cpp), then a ThreadSanitizer build (clang,
# -fsanitize=thread, CPU only, library + tool + tests) runs every CPU test, tests/test_concurrency
# first: one context per thread, a shared policy, a cache per thread, several threads' first
# calls on one fresh context. Any report fails the step (halt_on_error=1). About 4 minutes on 2
# cores (two builds, then about 70 s of tests). Prints a one-line summary.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
root="$PWD"
source .ci/lib/clang_tools.sh
jobs="${CMAKE_BUILD_PARALLEL_LEVEL:-2}"
start=$(date +%s)

clang_tools_install

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The TSan runtime ships separately on Debian (libclang-rt-<major>-dev): install it when a
# -fsanitize=thread program does not link.
printf '%s\n' '#include <thread>' 'int x;' \
  'int main() { std::thread t([] { x = 1; }); t.join(); return x - 1; }' > "$work/probe.cpp"
clang_runtime_ensure -fsanitize=thread "$work/probe.cpp" "$work/probe" "ThreadSanitizer runtime"
# TSan of LLVM 14 cannot map its shadow memory under the larger address-space randomisation of
# newer kernels (vm.mmap_rnd_bits > 28: "unexpected memory mapping" or a crash at start); run
# without randomisation there (the personality is inherited by ctest's children).
run=()
if ! "$work/probe" >/dev/null 2>&1; then
  if setarch "$(uname -m)" -R "$work/probe" >/dev/null 2>&1; then
    echo "note: TSan needs address-space randomisation off on this kernel; using setarch -R"
    run=(setarch "$(uname -m)" -R)
  else
    echo "a ThreadSanitizer program does not run on this machine:"
    "$work/probe" || true
    exit 1
  fi
fi
echo "$(clang++ --version | head -1)"

echo "== clang: the CPU library builds (Release, -Werror)"
cmake -S . -B "$root/build-ci-clang" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=Release -DINT8ATTN_ENABLE_CUDA=OFF -DINT8ATTN_BUILD_TESTS=OFF \
  -DINT8ATTN_BUILD_TOOLS=OFF -DINT8ATTN_WARNINGS_AS_ERRORS=ON >/dev/null
ninja -C "$root/build-ci-clang" -j"$jobs" int8attn >/dev/null
echo "clang build: ok"

# Sanitizer flags through CMake's own variables (no project option): clang links the TSan
# runtime statically into each executable and exports its symbols from there, never into a
# shared library, so libint8attn.so keeps undefined __tsan_* references that the executable
# resolves at load time. The library is linked with --no-undefined (CMakeLists.txt);
# -z undefs, placed last on the link line by CMAKE_CXX_STANDARD_LIBRARIES, lifts that here only.
echo "== ThreadSanitizer build"
tsan=(-DCMAKE_C_FLAGS=-fsanitize=thread -DCMAKE_CXX_FLAGS=-fsanitize=thread
  -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread -DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=thread
  -DCMAKE_CXX_STANDARD_LIBRARIES=-Wl,-z,undefs)
build="$root/build-ci-tsan"
cmake -S . -B "$build" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DINT8ATTN_ENABLE_CUDA=OFF -DINT8ATTN_WARNINGS_AS_ERRORS=ON \
  "${tsan[@]}" >/dev/null
ninja -C "$build" -j"$jobs" >/dev/null
built=$(date +%s)

export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1${TSAN_OPTIONS:+:$TSAN_OPTIONS}"
echo "== TSan: test_concurrency"
"${run[@]}" "$build/bin/test_concurrency"
echo "== TSan: every CPU test"
(cd "$build" && "${run[@]}" ctest -L cpu -j"$jobs" --output-on-failure --timeout 600)
end=$(date +%s)
ntests=$(cd "$build" && ctest -L cpu -N | sed -n 's/^Total Tests: //p')
echo "tsan: clang build ok; ${ntests} CPU tests clean under ThreadSanitizer" \
  "(builds $((built - start))s, tests $((end - built))s, total $((end - start))s)"
