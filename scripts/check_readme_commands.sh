#!/usr/bin/env bash
# Runs the shell commands of the README and the docs exactly as written, so a command that a
# reader copies cannot rot unnoticed (CI: .ci/steps/80-readme-commands.sh).
#
# Every ```bash / ```sh / ```shell block of README.md, CONTRIBUTING.md, docs/*.md,
# bindings/*/README.md and tests/*/README.md runs as one bash script from the repository root
# (so `cd` and `export` carry to the block's later lines), with `set -euo pipefail`, each command
# echoed first. A command is skipped, with its reason printed, only if
#   - it starts with a key of SKIP below (a GPU, the network, an hour, a file the reader brings),
#   - or its block follows a line `<!-- readme-check: skip REASON -->` (for new docs).
# A SKIP key that matches no command fails the check, so the list stays in step with the docs.
#
# Usage: scripts/check_readme_commands.sh [--list] [FILE...]
#   --list   print each command and whether it would run or be skipped (and why); run nothing
#   FILE     only these Markdown files (default: all of the above)
# The commands build into build/ and install the Python package with `pip`: run it in a fresh
# clone with a virtual environment active (as CI does), not in a working tree you care about.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

exec python3 - "$@" <<'PYEOF'
import glob
import os
import re
import shlex
import subprocess
import sys
import time

# Command prefix -> why it is not run here.
SKIP = {
    "build/bin/int8attn run wan_480p_81f":
        "a GPU shape (32760 tokens x 40 heads): hours on the CPU backend",
    "cmake --install build --prefix /opt/int8attn":
        "installs into /opt, outside the repository (.ci/steps/10-cpp.sh installs into a "
        "temporary prefix and builds a consumer through find_package and pkg-config)",
    "PKG_CONFIG_PATH=/opt/int8attn/lib/pkgconfig":
        "compiles the reader's main.c against the /opt install (10-cpp.sh builds its consumer "
        "the same way)",
    "CMAKE_ARGS=-DINT8ATTN_CUDA_ARCHS=all pip install":
        "compiles CUDA for every architecture (about 12 minutes on 2 cores)",
    "python -m pip wheel --no-deps -w dist/raw ./bindings/python":
        "the release wheel with CUDA for every architecture (about 12 minutes on 2 cores); "
        ".ci/steps/30-python.sh builds, repairs and checks the CPU wheel the same way",
    "python -m auditwheel repair -w dist dist/raw/":
        "repairs the release wheel of the skipped command before it (30-python.sh does it)",
    "python -m twine check --strict dist/":
        "checks the release wheel of the skipped commands before it (30-python.sh does it)",
    "build-fuzz/bin/int8attn_fuzz /tmp/corpus -runs=1000000":
        "1M fuzzing executions, what .ci/steps/26-fuzz.sh runs",
    "build-fuzz/bin/int8attn_fuzz /tmp/corpus -max_total_time=3600":
        "fuzzes for an hour",
    "bash .ci/steps/26-fuzz.sh":
        "is CI step 26 itself",
    "INT8ATTN_FUZZ_VERBOSE=1 build-fuzz/bin/int8attn_fuzz crash-":
        "needs a crash file from a failing fuzz run",
    "build-fuzz/bin/int8attn_fuzz crash-":
        "needs a crash file from a failing fuzz run",
}
DEFAULT_FILES = (["README.md", "CONTRIBUTING.md"] + sorted(glob.glob("docs/*.md"))
                 + sorted(glob.glob("bindings/*/README.md"))
                 + sorted(glob.glob("tests/*/README.md")))
FENCE = re.compile(r"^(\s*)```(bash|sh|shell)\s*$")
MARK = re.compile(r"<!--\s*readme-check:\s*skip\s*(.*?)\s*-->")


def blocks(path):
    """(first line number, text lines, skip reason or None) of each shell block of ``path``."""
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, start = len(m.group(1)), i + 1
        mark = None
        for back in lines[max(0, i - 2):i]:
            mm = MARK.search(back)
            if mm:
                mark = mm.group(1) or "marked in the file"
        body = []
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
            i += 1
        i += 1
        yield start, body, mark


def commands(body):
    """Logical commands of a block: lines joined over trailing backslashes; no comments."""
    out, cur = [], []
    for line in body:
        cur.append(line)
        if line.rstrip().endswith("\\"):
            continue
        text = "\n".join(cur)
        cur = []
        if text.strip() and not text.lstrip().startswith("#"):
            out.append(text)
    if cur:
        out.append("\n".join(cur))
    return out


def normalized(cmd):
    return re.sub(r"\s*\\\n\s*", " ", cmd).strip()


def skip_reason(cmd, mark, used):
    if mark:
        return mark
    flat = normalized(cmd)
    for key, why in SKIP.items():
        if flat.startswith(key):
            used.add(key)
            return why
    return None


def main(argv):
    list_only = "--list" in argv
    files = [a for a in argv if a != "--list"] or DEFAULT_FILES
    used, ran, skipped, failed = set(), 0, 0, []
    t0 = time.time()
    for path in files:
        for line, body, mark in blocks(path):
            cmds = commands(body)
            if not cmds:
                continue
            script = ["set -euo pipefail"]
            where = f"{path}:{line}"
            print(f"=== {where}", flush=True)
            for cmd in cmds:
                why = skip_reason(cmd, mark, used)
                flat = normalized(cmd)
                if why:
                    skipped += 1
                    note = f"skip: {flat}\n      ({why})"
                    if list_only:
                        print(note, flush=True)
                    else:  # in the block's output, where the command would have run
                        script.append(f"printf '%s\\n' {shlex.quote(note)}")
                    continue
                ran += 1
                if list_only:
                    print(f"run:  {flat}", flush=True)
                    continue
                script.append(f"printf '%s\\n' {shlex.quote('$ ' + flat)}")
                script.append(cmd)
            if list_only or len(script) == 1:
                continue
            if all(line.startswith("printf") for line in script[1:]):  # every command skipped
                subprocess.run(["bash", "-c", "\n".join(script)])
                continue
            start = time.time()
            rc = subprocess.run(["bash", "-c", "\n".join(script)]).returncode
            print(f"--- {where}: exit status {rc} after {time.time() - start:.0f}s", flush=True)
            if rc != 0:
                failed.append(where)
    stale = sorted(set(SKIP) - used)
    if stale and files == DEFAULT_FILES:  # only meaningful over every file
        for key in stale:
            print(f"stale SKIP entry (no command starts with it any more): {key!r}")
        failed.append("SKIP list")
    verb = "listed" if list_only else "ran"
    print(f"readme commands: {verb} {ran}, skipped {skipped} (reasons above), "
          f"{len(failed)} failed{': ' + ', '.join(failed) if failed else ''} "
          f"({time.time() - t0:.0f}s)")
    return 1 if failed else 0


sys.exit(main(sys.argv[1:]))
PYEOF
