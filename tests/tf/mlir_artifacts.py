"""Writes tests/tf/corpus/mlir/<name>.{mlirbc,mlir}: small JAX functions exported with `jax.export`
as StableHLO portable artifacts (the bytes jax2tf puts into an `XlaCallModule` node's `module`
attribute: MLIR bytecode of the VHLO dialect), and each module as MLIR itself prints it after
deserializing the artifact (generic operation form, no locations).

The Rust reader (`tpu_rewrite::syntax::mlir::read_portable_artifact`) decodes every `.mlirbc` and
its printer must give the `.mlir` text (tests/it/mlir_bytecode.rs).

Run after setup.sh:  tests/tf/.venv/bin/python tests/tf/mlir_artifacts.py
"""

import pathlib

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

OUT = pathlib.Path(__file__).parent / "corpus" / "mlir"

# Source locations in the modules name this script from the repository's root, not by where the
# checkout happens to be.
jax.config.update("jax_hlo_source_file_canonicalization_regex", r"^.*/(?=tests/tf/)")


def mlp_step(w1, b1, w2, x, y):
    """One SGD step of a two-layer tanh MLP: dot_general, broadcast, tanh, reduce."""

    def loss(params):
        w1, b1, w2 = params
        h = jnp.tanh(x @ w1 + b1)
        return jnp.mean((h @ w2 - y) ** 2)

    value, grads = jax.value_and_grad(loss)((w1, b1, w2))
    return value, tuple(p - 0.1 * g for p, g in zip((w1, b1, w2), grads))


def conv(x, k):
    """A strided, padded, dilated NHWC convolution followed by a ReLU."""
    y = lax.conv_general_dilated(
        x, k, window_strides=(2, 1), padding=((1, 1), (0, 1)), rhs_dilation=(1, 2),
        dimension_numbers=("NHWC", "HWIO", "NHWC"))
    return jnp.maximum(y, 0.0)


def while_loop(x):
    """A counted `lax.while_loop` carrying an integer and a vector."""

    def cond(c):
        return c[0] < 5

    def body(c):
        i, v = c
        return i + 1, v * 1.5 + jnp.float32(i)

    return lax.while_loop(cond, body, (jnp.int32(0), x))


def cond(p, x):
    """A `lax.cond` on a runtime predicate (stablehlo.case with two branches)."""
    return lax.cond(p > 0, lambda v: jnp.sin(v), lambda v: jnp.cos(v) * 2.0, x)


def gather_scatter(table, idx, upd):
    """Gather rows by index, then scatter-add updates into them."""
    rows = table[idx]
    return rows, table.at[idx].add(upd)


def argmax(x):
    """An arg-max along an axis: a reduce with two operands and a two-value body."""
    return jnp.argmax(x, axis=1), jnp.max(x, axis=0)


def int_bool_bf16(a, b, m, h):
    """Integer, boolean and bf16 math: shifts, compare, select, convert, rem."""
    s = (a << 2) ^ (b >> 1)
    c = jnp.where(m & (a > b), a % 3, -b)
    g = (h * jnp.bfloat16(0.5) + jnp.bfloat16(1.0)).astype(jnp.float32)
    u = (a.astype(jnp.uint32) * jnp.uint32(7)).astype(jnp.int8)
    return s, c, g, u, ~m


def large_constant(x):
    """A large non-splat constant, a splat one and an iota."""
    table = np.arange(4096, dtype=np.float32).reshape(64, 64) / 7.0
    return x @ table + jnp.full((64,), 2.5, jnp.float32), jnp.arange(64, dtype=jnp.int32)


def windows_and_shapes(x, i):
    """Max pooling (reduce_window), sort, pad, slice, concatenate, reverse, dynamic_slice, cumsum."""
    pooled = lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 1, 1), "SAME")
    flat = jnp.sort(x.reshape(-1))
    padded = jnp.pad(x[0, :, :, 0], ((1, 0), (0, 2)))
    joined = jnp.concatenate([padded[::2], jnp.flip(padded, 1)[1:3]], axis=0)
    window = lax.dynamic_slice(x, (jnp.int32(0), i, jnp.int32(0), jnp.int32(0)), (1, 2, 3, 2))
    return pooled, flat, joined, window, jnp.cumsum(x, axis=2)


def f32(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


CASES = {
    "mlp_step": (mlp_step, (f32(4, 8), f32(8), f32(8, 2, seed=1), f32(3, 4, seed=2), f32(3, 2, seed=3))),
    "conv": (conv, (f32(1, 6, 5, 2), f32(3, 2, 2, 4, seed=1))),
    "while_loop": (while_loop, (f32(3),)),
    "cond": (cond, (np.float32(1.0), f32(4))),
    "gather_scatter": (gather_scatter, (f32(5, 3), np.array([0, 3, 3], np.int32), f32(3, 3, seed=1))),
    "argmax": (argmax, (f32(3, 5),)),
    "int_bool_bf16": (int_bool_bf16, (np.arange(6, dtype=np.int32), np.arange(6, 0, -1, dtype=np.int32),
                                      np.array([True, False] * 3), np.ones(6, jnp.bfloat16))),
    "large_constant": (large_constant, (f32(2, 64),)),
    "windows_and_shapes": (windows_and_shapes, (f32(1, 4, 5, 2), np.int32(1))),
}


def generic_text(artifact: bytes) -> str:
    """The artifact deserialized by StableHLO and printed by MLIR in generic form."""
    with ir.Context() as ctx:
        stablehlo.register_dialect(ctx)
        module = stablehlo.deserialize_portable_artifact(ctx, artifact)
        return module.operation.get_asm(print_generic_op_form=True, large_elements_limit=None)


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    for name, (fn, args) in CASES.items():
        exported = jax.export.export(jax.jit(fn), platforms=["cpu"])(*args)
        artifact = bytes(exported.mlir_module_serialized)
        (OUT / f"{name}.mlirbc").write_bytes(artifact)
        (OUT / f"{name}.mlir").write_text(generic_text(artifact))
        print(f"{name}: {len(artifact)} bytes")


if __name__ == "__main__":
    main()
