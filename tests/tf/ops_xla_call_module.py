"""Writes tests/tf/corpus/ops/xla_call_module.{pbtxt,json}: `XlaCallModule` nodes holding StableHLO
modules serialized by `jax.export` (calling convention version 10, platform CPU), as jax2tf's
native serialization makes them, with TensorFlow's numbers (TensorFlow runs the module through XLA,
in graph mode and under `jit_compile` alike). TensorFlow registers no gradient for the op.

The modules are small programs of the kinds a JAX model carries: an MLP forward with a log-softmax,
a convolution + relu + max and average pooling, a `lax.while_loop` and a `fori_loop`, a `lax.cond`
and a three-way `lax.switch`, reductions with an arg-max, integer and bool math, gathers (rows, columns) with
a dynamic slice and a scatter-add, and a sort; gathers and scatters with batching dimensions
(`jnp.take_along_axis`, `vmap` of indexing and of scatters), and plain
reductions (sum, product, max, min, all, any, and reductions from an initial value that is not the
reduction's identity), which the raise makes TensorFlow's Sum/Prod/Max/Min/All/Any; and window
reductions of two operands (an arg-max pooling, a dilated sum and max).

Run after setup.sh:  tests/tf/.venv/bin/python tests/tf/ops_xla_call_module.py
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import export, lax

import op_cases
from op_cases import Case

# Source locations in the modules name this script from the repository's root, not by where the
# checkout happens to be.
jax.config.update("jax_hlo_source_file_canonicalization_regex", r"^.*/(?=tests/tf/)")


def rand(seed, *shape, dtype=np.float32, scale=2.0):
    return np.random.default_rng(seed).uniform(-scale, scale, size=shape).astype(dtype)


def ints(seed, lo, hi, *shape):
    return np.random.default_rng(seed).integers(lo, hi, size=shape).astype(np.int32)


def module_case(name, fn, args, rtol=1e-5):
    """A case calling `fn`, exported by `jax.export` for the CPU, on the arrays `args`."""
    specs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in args]
    exported = export.export(jax.jit(fn), platforms=["cpu"])(*specs)
    return Case(name, "XlaCallModule", inputs={"args": list(args)}, grad=False, rtol=rtol, attrs={
        "version": exported.calling_convention_version,
        "module": exported.mlir_module_serialized,
        "Sout": [a.shape for a in exported.out_avals],
        "Tout": [a.dtype for a in exported.out_avals],
        "dim_args_spec": [],
        "platforms": ["CPU"],
        "function_list": [],
        "has_token_input_output": False,
        "disabled_checks": [],
    })


def mlp(x, w1, b1, w2, b2):
    h = jax.nn.relu(x @ w1 + b1)
    logits = h @ w2 + b2
    return logits, jax.nn.log_softmax(logits, axis=-1)


def conv_relu_pool(x, k):
    y = lax.conv_general_dilated(x, k, window_strides=(1, 1), padding="SAME",
                                 dimension_numbers=("NHWC", "HWIO", "NHWC"))
    y = jax.nn.relu(y)
    mx = lax.reduce_window(y, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    avg = lax.reduce_window(y, 0.0, lax.add, (1, 3, 3, 1), (1, 1, 1, 1), "SAME") / 9.0
    return mx, avg


def while_loop(x, n):
    def cond(c):
        return c[0] < n

    def body(c):
        i, v = c
        return i + 1, v * 0.75 + jnp.sin(v)

    i, v = lax.while_loop(cond, body, (jnp.int32(0), x))
    s = lax.fori_loop(0, 4, lambda j, acc: acc + v * j.astype(jnp.float32), jnp.zeros_like(x))
    return i, v, s


def cond(p, x, y):
    a = lax.cond(p[0] > 0, lambda a, b: a * b + 1.0, lambda a, b: a - jnp.exp(b), x, y)
    b = lax.switch(jnp.clip(p[1], 0, 2).astype(jnp.int32),
                   [lambda v: v * 2.0, lambda v: jnp.cos(v), lambda v: -v], x)
    return a, b


def reduce_argmax(x):
    return (jnp.sum(x, axis=1), jnp.max(x, axis=0), jnp.mean(x),
            jnp.argmax(x, axis=1).astype(jnp.int32), jnp.prod(x[:, :3], axis=1))


def int_bool(a, b, m):
    q = a // jnp.where(b == 0, 1, b)
    r = jnp.remainder(a, jnp.where(b == 0, 1, b))
    bits = (a & b) ^ (a | 7) + (b << 2) - (a >> 1)
    mix = jnp.where(m & (a > b), jnp.maximum(a, b), jnp.minimum(a, b) * 3)
    anyb = jnp.any(m, axis=1) | jnp.logical_not(jnp.all(a > -3, axis=1))
    return q, r, bits, mix, anyb, jnp.abs(a - b).sum(axis=0), jnp.clip(a, -2, 2)


def gather(x, idx, start, upd):
    rows = x[idx]
    taken = jnp.take(x, (jnp.abs(idx) + 1) % x.shape[1], axis=1)
    window = lax.dynamic_slice(x, (start[0], start[1]), (2, 3))
    scattered = x.at[idx].add(upd)
    return rows, taken, window, scattered


def sort(x):
    return jnp.sort(x, axis=1), jnp.argsort(x[0]).astype(jnp.int32)


def batched_gather(x, idx, i, y, idx3, upd):
    along = jnp.take_along_axis(x, idx, axis=1)
    along3 = jnp.take_along_axis(y, idx3, axis=-1)
    picked = jax.vmap(lambda r, j: r[j])(x, i)
    rows = x[jnp.arange(x.shape[0]), i]
    added = jax.vmap(lambda r, j, u: r.at[j].add(u))(x, i, upd)
    put = jax.vmap(jax.vmap(lambda r, j: r.at[j].set(0.0)))(y, idx3[:, :, 0])
    return along, along3, picked, rows, added, put


def plain_reductions(x, a, m):
    return (jnp.sum(x, axis=0), jnp.max(x, axis=1), jnp.min(x), jnp.prod(x, axis=1),
            jnp.sum(a, axis=1), jnp.max(a, axis=0), jnp.min(a, axis=1), jnp.prod(a[:2], axis=0),
            jnp.all(m, axis=0), jnp.any(m, axis=1), jnp.any(m & False),
            lax.reduce(x, np.float32(1.5), lax.add, (1,)), lax.reduce(x, np.float32(0.25), lax.max, (0,)),
            lax.reduce(a, np.int32(2), lax.max, (0,)), lax.reduce(a, np.int32(-1), lax.min, (1,)))


def window_pairs(x):
    idx = lax.broadcasted_iota(jnp.int32, x.shape, 1)

    def pick(a, b):
        take = (a[0] > b[0]) | ((a[0] == b[0]) & (a[1] < b[1]))
        return jnp.where(take, a[0], b[0]), jnp.where(take, a[1], b[1])

    v, i = lax.reduce_window((x, idx), (-jnp.inf, jnp.int32(0)), pick, (1, 3), (1, 2), "VALID")
    s, m = lax.reduce_window((x, x), (0.5, -jnp.inf), lambda a, b: (a[0] + b[0], jnp.maximum(a[1], b[1])),
                             (2, 2), (1, 2), "VALID", window_dilation=(1, 2))
    return v, i, s, m


cases = [
    module_case("mlp", mlp, [rand(1, 4, 3), rand(2, 3, 5), rand(3, 5), rand(4, 5, 2), rand(5, 2)], rtol=1e-5),
    module_case("conv_relu_pool", conv_relu_pool, [rand(6, 1, 6, 6, 2), rand(7, 3, 3, 2, 3)], rtol=1e-5),
    module_case("while_loop", while_loop, [rand(8, 2, 3), np.array(5, np.int32)]),
    module_case("cond_true", cond, [np.array([1, 0], np.int32), rand(9, 3), rand(10, 3)]),
    module_case("cond_false", cond, [np.array([-1, 2], np.int32), rand(9, 3), rand(10, 3)]),
    module_case("reduce_argmax", reduce_argmax, [rand(11, 3, 5)]),
    module_case("int_bool", int_bool, [ints(12, -9, 10, 3, 4), ints(13, -4, 5, 3, 4),
                                       np.random.default_rng(14).random((3, 4)) > 0.5]),
    module_case("gather", gather, [rand(15, 4, 5), np.array([2, 0, 3], np.int32),
                                   np.array([1, 3], np.int32), rand(16, 3, 5)]),
    module_case("sort", sort, [rand(17, 2, 5)]),
    module_case("batched_gather", batched_gather, [rand(18, 3, 5), ints(19, 0, 5, 3, 4), ints(20, 0, 5, 3),
                                                   rand(21, 2, 3, 4), ints(22, 0, 4, 2, 3, 2), rand(23, 3)]),
    module_case("window_pairs", window_pairs, [rand(27, 3, 7)]),
    module_case("plain_reductions", plain_reductions, [rand(24, 3, 4), ints(25, -9, 10, 3, 4),
                                                       np.random.default_rng(26).random((3, 4)) > 0.3]),
]

op_cases.write_family("xla_call_module", cases)
