# Sourced by the clang-based CI steps (25-tsan.sh, 26-fuzz.sh): clang, cmake and ninja, and the
# sanitizer runtime a probe program needs (Debian ships it separately, libclang-rt-<major>-dev).
#   clang_tools_install                      clang, cmake, ninja-build if missing
#   clang_runtime_ensure FLAGS PROBE OUT WHAT  link PROBE (a .cpp) with FLAGS into OUT; if that
#                                            fails, install the runtime (WHAT names it) and retry
if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi

clang_tools_install() {
  local need=()
  command -v clang >/dev/null && command -v clang++ >/dev/null || need+=(clang)
  command -v cmake >/dev/null || need+=(cmake)
  command -v ninja >/dev/null || need+=(ninja-build)
  if [ ${#need[@]} -gt 0 ]; then
    echo "installing: ${need[*]}"
    $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  fi
}

clang_runtime_ensure() {
  local flags="$1" probe="$2" out="$3" what="$4" major
  if ! clang++ "$flags" "$probe" -o "$out" 2>/dev/null; then
    major=$(clang++ -dumpversion | cut -d. -f1)
    echo "installing: libclang-rt-${major}-dev (${what})"
    $SUDO apt-get install -y -qq --no-install-recommends "libclang-rt-${major}-dev" >/dev/null
    clang++ "$flags" "$probe" -o "$out"
  fi
}
