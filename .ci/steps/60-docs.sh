#!/usr/bin/env bash
# Documentation: Doxygen over include/int8attn.h plus the guides in docs/. Any warning fails
# (the Doxyfile sets WARN_AS_ERROR=YES; the log is checked too, in case a warning slips through).
# Output goes to build-docs/ (not committed). No graphviz: the Doxyfile draws no graphs.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
command -v doxygen >/dev/null || $SUDO apt-get install -y -qq --no-install-recommends doxygen >/dev/null
doxygen --version
rm -rf build-docs
log=$(mktemp)
doxygen docs/Doxyfile 2>&1 | tee "$log"   # from the root, as the README says
status=${PIPESTATUS[0]}
if [ "$status" -ne 0 ] || grep -qiE "warning|error" "$log"; then
  echo "docs: doxygen reported warnings or errors (see above)"
  exit 1
fi
test -f build-docs/html/index.html
echo "docs: OK (build-docs/html/index.html)"
