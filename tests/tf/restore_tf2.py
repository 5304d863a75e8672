"""Restores a tpu-rewrite checkpoint into a corpus_tf2 model with TensorFlow, and prints the values.

Usage: tests/tf/.venv/bin/python tests/tf/restore_tf2.py NAME PREFIX

Builds the objects corpus_tf2.py saves for NAME (a fresh Keras session, so the names agree), restores
`tf.train.Checkpoint(model=..., optimizer=...)` from PREFIX (DIR/ckpt for DIR/ckpt.index) over a
sentinel (-7 in every variable, so a variable the checkpoint misses shows), and prints {variable path: {"dtype", "shape", "values"}} as JSON.
"""

import json
import os
import sys

os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tensorflow as tf  # noqa: E402

import corpus_tf2  # noqa: E402


def main(name, prefix):
    trainer, _ = corpus_tf2.build(name)
    # A sentinel in every variable first: one the checkpoint misses keeps it and shows in the values.
    for v in corpus_tf2.variables(trainer).values():
        v.assign(tf.fill(v.shape, tf.constant(-7, v.dtype)))
    checkpoint = tf.train.Checkpoint(model=trainer.model, optimizer=trainer.optimizer)
    # The Checkpoint's own `save_counter` is the one object the file need not hold.
    checkpoint.restore(prefix).expect_partial().assert_nontrivial_match()
    values = {path: corpus_tf2.enc(v.numpy()) for path, v in corpus_tf2.variables(trainer).items()}
    json.dump(values, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
