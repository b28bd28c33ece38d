#!/bin/sh
# Runs one stage command with the project's interpreter: `sh stages/run.sh python stages/x.py ...`
# (dvc.yaml's stage commands start this way). `.venv/bin/dvc repro` from a fresh shell, with no
# activated environment, would otherwise run `python` from PATH, the system's.
#
# The environment is, in order: $UAPROBE_VENV if set; the project's .venv (for a DVC experiment
# run in a temporary copy, .dvc/tmp/exps/..., the enclosing project's); else the `python` on PATH,
# if it can import uaprobe (an environment the user activated). Its bin/ goes first on PATH, so
# `python`, `torchrun` and `accelerate` (extract.launcher) all resolve there. PYTHONHASHSEED is
# fixed as `make` fixes it.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${UAPROBE_VENV:-}
if [ -z "$venv" ]; then
  case "$root" in
    */.dvc/tmp/exps/*) outer=${root%%/.dvc/tmp/exps/*} ;;
    *) outer=$root ;;
  esac
  for candidate in "$root/.venv" "$outer/.venv"; do
    if [ -x "$candidate/bin/python" ]; then venv=$candidate; break; fi
  done
fi
if [ -n "$venv" ]; then
  if [ ! -x "$venv/bin/python" ]; then
    echo "stages/run.sh: $venv/bin/python not found; set UAPROBE_VENV to a virtual environment with uaprobe installed, or run \`make setup\`" >&2
    exit 2
  fi
  PATH="$venv/bin:$PATH"
  export PATH
elif ! python -c "import uaprobe" >/dev/null 2>&1; then
  echo "stages/run.sh: no .venv in $root and \`python\` on PATH ($(command -v python || echo none)) cannot import uaprobe; run \`make setup\` (creates .venv) or set UAPROBE_VENV" >&2
  exit 2
fi
PYTHONHASHSEED=0
export PYTHONHASHSEED
exec "$@"
