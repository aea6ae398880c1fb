#!/usr/bin/env bash
# The C, C++ and CUDA sources match .clang-format (clang-format 14, Debian's). CI runs this;
# `bash scripts/check_format.sh --fix` formats the files in place. Checked: every tracked
# .c/.h/.cpp/.cu/.cuh file except generated ones (cuda/sm90/wgmma_ops.cuh, whose generator CI
# checks) and committed benchmark results.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
CLANG_FORMAT=${CLANG_FORMAT:-clang-format}
command -v "$CLANG_FORMAT" >/dev/null || { echo "check_format: $CLANG_FORMAT not found"; exit 1; }
mapfile -t files < <(git ls-files '*.c' '*.h' '*.cpp' '*.cu' '*.cuh' |
  grep -v -e '^cuda/sm90/wgmma_ops\.cuh$' -e '^bench/results/')
if [ "${1:-}" = "--fix" ]; then
  "$CLANG_FORMAT" -i "${files[@]}"
  echo "check_format: formatted ${#files[@]} files"
  exit 0
fi
bad=0
for f in "${files[@]}"; do
  if ! "$CLANG_FORMAT" "$f" | cmp -s - "$f"; then
    echo "check_format: $f differs from .clang-format; the fix:"
    "$CLANG_FORMAT" "$f" | diff -u "$f" - | head -20 || true
    bad=$((bad + 1))
  fi
done
if [ "$bad" -gt 0 ]; then
  echo "check_format: $bad of ${#files[@]} files need formatting (bash scripts/check_format.sh --fix)"
  exit 1
fi
echo "check_format: OK (${#files[@]} files, $("$CLANG_FORMAT" --version | grep -o 'version [0-9.]*'))"
