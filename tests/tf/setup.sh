#!/usr/bin/env bash
# Makes the development venv from tests/tf/requirements.txt (TensorFlow
# 2.21, tf_keras, JAX, pytest; from PyPI) and requirements-nodeps.txt
# (keras-hub, without its dependencies), and links tests/tf/.venv to it.
# The venv lives in the tpu-rewrite cache directory, keyed by a hash of the
# requirements, so every clone on a machine shares one; a lock keeps two
# callers from building it at once. Idempotent.
# Usage: bash tests/tf/setup.sh && tests/tf/.venv/bin/python tests/tf/make_corpus.py
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
req="$here/requirements.txt"
nodeps="$here/requirements-nodeps.txt"
cache="${TPU_REWRITE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tpu-rewrite}"
venv="$cache/dev-venv-$(cat "$req" "$nodeps" | sha256sum | cut -c1-12)"
mkdir -p "$cache"
exec 9>"$cache/.dev-venv.lock"
flock 9
if [ ! -f "$venv/.complete" ]; then
  rm -rf "$venv"
  "${PYTHON:-python3}" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$req"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps -r "$nodeps"
  touch "$venv/.complete"
fi
link="$here/.venv"
if [ "$(readlink "$link" 2>/dev/null || true)" != "$venv" ]; then
  # An older layout kept a venv directory here; it is generated, not data.
  rm -rf "$link"
  ln -s "$venv" "$link"
fi
"$link/bin/python" -c 'import tensorflow as tf; print("tensorflow", tf.__version__)'
