"""Shared setup of the tpu_rewrite tests: eight host CPU devices for JAX
(set before jax is imported anywhere), quiet TensorFlow, the repository root."""

import os
import pathlib

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import pytest  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture
def root():
    return ROOT
