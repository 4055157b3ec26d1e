#!/usr/bin/env bash
# Build Horovod (for the `horovod` training strategy) against the torch in .venv, and install it.
#
# Why a build: Horovod 0.28.1, its last release, publishes no wheels, and its sdist asks CMake
# for C++14 while torch >= 2.1's headers need C++17 (upstream horovod#3996, fixed after 0.28.1).
# This script patches the two CMake files that set the standard and builds a wheel with Gloo (no
# MPI, no TensorFlow, no MXNet).
#
# The build takes minutes, so the wheel is kept in a cache outside the repository
# (PLAIT_WHEEL_CACHE, default ~/.cache/plait/wheels), keyed by the torch version it was compiled
# against (its extension links to torch's C++ library); a fresh clone on the same machine
# installs it in seconds. Safe to run again: an installed Horovod that imports is left alone.
# The build's output goes to a log file, shown only on failure.
set -euo pipefail
cd "$(dirname "$0")/.."

HOROVOD_VERSION=0.28.1
PY=.venv/bin/python
[ -x "$PY" ] || { echo "build_horovod: $PY not found; run scripts/setup.sh first" >&2; exit 1; }

torch_version=$("$PY" -c "import torch; print(torch.__version__.split('+')[0])")
cache_dir="${PLAIT_WHEEL_CACHE:-$HOME/.cache/plait/wheels}/horovod-$HOROVOD_VERSION-torch$torch_version"
log="${cache_dir}/build.log"

horovod_works() {
  # The version must match and horovod.torch must import: that loads the compiled extension,
  # which fails if it was built against another torch.
  "$PY" - "$HOROVOD_VERSION" >/dev/null 2>&1 <<'EOF'
import sys
from importlib.metadata import version
assert version("horovod") == sys.argv[1]
import horovod.torch  # noqa: F401
EOF
}

fail() {
  [ -s "$log" ] && cat "$log" >&2
  echo "build_horovod: $* (log above, also in $log)" >&2
  exit 1
}

# Replace exactly `from` by `to` in a file; a missing pattern means the sdist is not the one
# this script was written for, so stop rather than build something unpatched.
patch_line() {
  local file=$1 from=$2 to=$3
  grep -qF "$from" "$file" || fail "pattern '$from' not found in $file"
  sed -i "s/${from}/${to}/" "$file"
}

build_wheel() {
  local work
  work=$(mktemp -d)
  # shellcheck disable=SC2064  # expand $work now: it is local to this function
  trap "rm -rf '$work'" EXIT
  echo "build_horovod: building Horovod $HOROVOD_VERSION against torch $torch_version (several minutes; log: $log)"
  "$PY" -m pip download --disable-pip-version-check --no-deps --no-binary :all: \
    "horovod==$HOROVOD_VERSION" -d "$work" >>"$log" 2>&1 || fail "downloading the horovod sdist failed"
  tar -xzf "$work/horovod-$HOROVOD_VERSION.tar.gz" -C "$work"
  local src="$work/horovod-$HOROVOD_VERSION"
  patch_line "$src/CMakeLists.txt" "set(CMAKE_CXX_STANDARD 14)" "set(CMAKE_CXX_STANDARD 17)"
  patch_line "$src/horovod/torch/CMakeLists.txt" "set(CMAKE_CXX_STANDARD 14)" "set(CMAKE_CXX_STANDARD 17)"
  # setup.py runs make -j8 unless MAKEFLAGS is set: one job per core keeps a small machine's memory in bounds.
  HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=1 \
    HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1 MAKEFLAGS="-j$(nproc)" \
    "$PY" -m pip wheel --disable-pip-version-check --no-build-isolation --no-deps \
    -w "$work/dist" "$src" >>"$log" 2>&1 || fail "building the horovod wheel failed"
  # Moved into the cache only when complete, so an interrupted build never leaves a broken wheel there.
  local wheel
  wheel=$(ls "$work"/dist/horovod-*.whl)
  mv "$wheel" "$cache_dir/.partial.whl"
  mv "$cache_dir/.partial.whl" "$cache_dir/$(basename "$wheel")"
}

if horovod_works; then
  echo "build_horovod: Horovod $HOROVOD_VERSION is already installed"
  exit 0
fi

mkdir -p "$cache_dir"
: > "$log"
py_tag=$("$PY" -c "import sys; print(f'cp{sys.version_info.major}{sys.version_info.minor}')")
wheel=$(ls "$cache_dir"/horovod-"$HOROVOD_VERSION"-"$py_tag"-*.whl 2>/dev/null | head -n 1 || true)
if [ -z "$wheel" ]; then
  build_wheel
  wheel=$(ls "$cache_dir"/horovod-"$HOROVOD_VERSION"-"$py_tag"-*.whl | head -n 1)
else
  echo "build_horovod: installing the cached $wheel"
fi
# Forced, without dependencies: pip would otherwise keep a same-version install that no longer
# imports (built against an earlier torch). The second call adds its runtime dependencies
# (cloudpickle, psutil, pyyaml, packaging, cffi), pinned by constraints.txt.
pip_install() {
  "$PY" -m pip install --disable-pip-version-check -c constraints.txt "$@" >>"$log" 2>&1 \
    || fail "pip install $* failed"
}
pip_install --force-reinstall --no-deps "$wheel"
pip_install "$wheel"
"$PY" -c "import horovod.torch" >>"$log" 2>&1 || fail "Horovod installed but 'import horovod.torch' fails"
echo "build_horovod: Horovod $HOROVOD_VERSION ready"
