#!/usr/bin/env bash
# Builds the tpu_rewrite wheel into a venv and runs its pytest suite.
#
# The venv is the development venv of tests/tf/setup.sh (TensorFlow, JAX,
# pytest: tests/tf/requirements.txt), shared with the TensorFlow scripts and
# made once per machine; `pip install .` then builds the wheel through
# maturin (a dev profile build, which reuses the workspace's target
# directory) and the suite runs against the installed package. Any failure,
# and a run that collects no test (pytest exit 5), fails the script.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bash "$root/tests/tf/setup.sh" >/dev/null
venv="$root/tests/tf/.venv"
cd "$root"
# A dev-profile extension builds in a fraction of a release build's time;
# `pip install .` without this variable builds the release wheel users get.
MATURIN_PEP517_ARGS="${MATURIN_PEP517_ARGS:---profile dev}" \
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps .
# The package imports from a fresh interpreter outside the clone.
(cd / && "$venv/bin/python" -c 'import tpu_rewrite; print("tpu_rewrite", tpu_rewrite.__version__)')
"$venv/bin/python" -m pytest -q python/tests "$@"
