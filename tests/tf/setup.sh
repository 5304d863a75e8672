#!/usr/bin/env bash
# Makes tests/tf/.venv with tensorflow-cpu 2.21.0, tf_keras 2.21 and keras-hub 0.32.0 from PyPI (idempotent).
# Usage: bash tests/tf/setup.sh && tests/tf/.venv/bin/python tests/tf/make_corpus.py
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="$here/.venv"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
if ! "$venv/bin/python" -c 'import tensorflow as tf; assert tf.__version__ == "2.21.0"' 2>/dev/null; then
  "$venv/bin/pip" install --quiet --upgrade pip
  "$venv/bin/pip" install --quiet 'tensorflow-cpu==2.21.0' numpy
fi
if ! "$venv/bin/python" -c 'import tf_keras; assert tf_keras.__version__.startswith("2.21.")' 2>/dev/null; then
  "$venv/bin/pip" install --quiet 'tf_keras==2.21.*'
fi
# keras-hub without its dependencies: they would replace TensorFlow (tensorflow-text pins its own), and
# the corpus (corpus_tf2.py: a tiny GPT2Backbone from its constructor) needs only these two besides Keras.
if ! "$venv/bin/python" -c 'import keras_hub; assert keras_hub.__version__ == "0.32.0"' 2>/dev/null; then
  "$venv/bin/pip" install --quiet --no-deps 'keras-hub==0.32.0' 'regex' 'tokenizers'
fi
"$venv/bin/python" -c 'import tensorflow as tf; print("tensorflow", tf.__version__)'
