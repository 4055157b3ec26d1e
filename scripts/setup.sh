#!/usr/bin/env bash
# Create .venv with plait and its exact, pinned dependencies (constraints.txt).
# Safe to run again: pip only installs what is missing. pip's output goes to .venv/setup.log
# and is shown only if a step fails.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
log=.venv/setup.log
: > "$log"
pip_install() {
  if ! .venv/bin/python -m pip install --disable-pip-version-check "$@" >>"$log" 2>&1; then
    cat "$log" >&2
    echo "setup: pip install $* failed (log above, also in $log)" >&2
    exit 1
  fi
}
# The report's browser test opens the page in Debian's Chromium: installed (once per machine)
# beside pip's work, which it does not touch.
bash scripts/install_chromium.sh &
chromium=$!
pip_install --upgrade "pip>=24"
# Every module is byte-compiled once, here: where PYTHONDONTWRITEBYTECODE is set, every process
# (each Ray worker and actor, each CLI run) would otherwise compile what it imports again. pip
# compiles what it installs on one core (--no-compile stops it); compileall uses both, and
# compiles torch's modules while pip installs the rest.
site=$(.venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
compile_all() { .venv/bin/python -m compileall -q -j 0 "$@" >/dev/null 2>&1 || true; }
# torch first and alone, pinned: an unpinned resolve could pull a multi-GB CUDA build.
pip_install --no-compile -c constraints.txt "torch==2.13.0"
compile_all "$site/torch" &
torch_compiled=$!
# DS_BUILD_OPS=0: DeepSpeed installs without compiling its C++ ops (plait uses none of them).
DS_BUILD_OPS=0 pip_install --no-compile -c constraints.txt \
  -e ".[ray,modin,s3,serve,audio,image,hf,test,deepspeed,viz,tracking,export,tree]"
bash scripts/build_horovod.sh  # no Horovod wheels for this torch: built once per machine (minutes), then cached
wait "$torch_compiled"
compile_all "$site" plait  # what is compiled already is skipped; plait's own (editable) modules too
wait "$chromium"
.venv/bin/python -c "import plait, torch, pyarrow; print(f'plait {plait.__version__} ready (torch {torch.__version__}, pyarrow {pyarrow.__version__})')"
