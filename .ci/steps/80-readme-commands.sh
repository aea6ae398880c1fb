#!/usr/bin/env bash
# Every shell command of the README and the docs, run as written (scripts/check_readme_commands.sh;
# a command that needs a GPU, an hour or a file the reader brings is skipped with its reason
# printed). Runs last: in the Python venv of 30-python.sh (so `pip` and `python` are the venv's,
# as in a reader's virtual environment), with the Rust toolchain of 40-rust.sh, Mono of
# 50-csharp.sh and doxygen of 60-docs.sh. The commands may write only ignored paths (build/,
# build-docs/, build-fuzz/, bindings/rust/target/): any other change to the tree fails the step.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
venv="${INT8ATTN_CI_VENV:-build-ci/py-venv}"
if [ ! -x "$venv/bin/python" ]; then
  echo "no Python venv at $venv: run .ci/steps/30-python.sh first"
  exit 1
fi
venv="$(cd "$venv" && pwd)"
export VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}"
[ -d "$HOME/.cargo/bin" ] && export PATH="$PATH:$HOME/.cargo/bin"

before=$(git status --porcelain --untracked-files=all)
bash scripts/check_readme_commands.sh
after=$(git status --porcelain --untracked-files=all)
if [ "$before" != "$after" ]; then
  echo "the README/docs commands changed files outside the ignored build directories:"
  diff <(echo "$before") <(echo "$after") || true
  exit 1
fi
echo "readme commands: the tree is unchanged"
