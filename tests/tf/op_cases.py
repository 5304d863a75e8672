"""The shared harness for per-op cases with TensorFlow's numbers (imported by tests/tf/ops_*.py).

A family script builds a list of `Case`s and calls `write_family(family, cases)`, which writes
  tests/tf/corpus/ops/<family>.pbtxt  one GraphDef holding every case; a case's nodes are named
                                      `<case>__<what>` (placeholders `<case>__<arg>` or
                                      `<case>__<arg>_<i>` for list args, the op `<case>__op`, its
                                      outputs `<case>__out_<k>`, a resource variable's value after
                                      the op `<case>__var_<arg>`, the loss `<case>__loss`);
  tests/tf/corpus/ops/<family>.json   {"tensorflow", "family", "cases": [case...]} with, per case:
      "name", "op", "rtol",
      "feeds":   {placeholder: T},
      "outputs": {node: T}          TensorFlow's CPU kernels (graph mode, one session run),
      "xla":     {node: T} | null   TensorFlow's XLA bridge (`tf.function(jit_compile=True)`),
                                    null with "xla_error" when TensorFlow does not compile the op,
      "grads":   [{"x": placeholder, "value": T}] | null
                                    tf.gradients of loss = sum_k sum(out_k * w_k) (fixed weights,
                                    float outputs, in f32 for 16-bit outputs) with respect to each
                                    float placeholder that has one; null when TensorFlow registers
                                    no gradient ("grad_error" says why) or the case asks for none,
      "xla_grads": [{"x", "value"}] | null   only with `Case(xla_grads=True)`: the gradients under
                                    TensorFlow's XLA bridge (`tf.GradientTape` inside the compiled
                                    function), which PJRT's gradients are compared with,
  with T = {"dtype", "shape", "values" (flat, row-major; "nan"/"inf"/"-inf" as strings)}; a
  complex64/complex128 T holds interleaved (real, imaginary) pairs in "values".

`Case.inputs` become placeholders (fed), `Case.consts` Const nodes (what XLA needs constant: axes,
shapes, sizes), an attr whose value is a concrete `tf.function` (a reducer, comparator or branch)
becomes a function of the GraphDef's library named by the attr, `Case.variables` resource variables
whose handle is passed (their value after the op is an output; with `var_grads=True` the gradients
also go to each float variable's handle, recorded with "x" the variable's node). `Case.op` is a raw
op's name or, for a case of several ops (TensorLists, TensorArrays: values a placeholder cannot
feed), a function `fn(**args, **attrs, name=...)` that builds them and returns the tensors to
compare. `Case.post`, when given, maps the op's outputs to the tensors compared and weighted (ops
after the op, named `<case>__post/...`): for outputs unique only up to sign, such as eigenvectors
compared as `v * v`. An op TensorFlow runs only under XLA (no CPU kernel: `XlaDot`, `Segment*V2`, ...)
takes `cpu=False`: its "outputs" are then the XLA values, and its "grads" come from
`tf.GradientTape` inside the compiled function. A case may give `fn`, a function of the
arguments (inputs and consts, by name) that applies the op within a few others, instead of the op
alone: gradients are recorded for float placeholders only, so `fn` lets float inputs be
differentiated through ops on complex values (e.g. `Complex(re, im)` -> `FFT` -> `Real`); its ops
are named under `<case>__op/`. `Case.qtypes` gives a quantized dtype (`tf.qint8`, `tf.quint8`,
`tf.qint32`) to an input or const given as the plain integer array of its values (numpy has no
quantized dtypes); the JSON records such values with the plain dtype. tests/it/support/op_cases.rs reads both files, adds the IR's own `gradients`,
and runs everything on the simulator and on PJRT.
"""

import json
import os
import sys
import zlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

tf.get_logger().setLevel("ERROR")

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "ops")

FLOATS = (tf.float16, tf.bfloat16, tf.float32, tf.float64)


class Case:
    """One op applied once: see the module's doc."""

    def __init__(self, name, op, inputs=None, consts=None, variables=None, attrs=None, grad=True, rtol=1e-5,
                 xla=True, cpu=True, node_attrs=None, post=None, fn=None, var_grads=False, qtypes=None,
                 xla_grads=False):
        if "__" in name or not name.replace("_", "a").isalnum():
            raise ValueError(f"case name {name!r}: letters, digits and single underscores only")
        self.name = name
        # A raw op's name, or a function `fn(**args, name=...)` that builds several ops (a case
        # whose op makes or takes values a placeholder cannot hold, such as TensorLists).
        self.op = op
        self.op_name = op if isinstance(op, str) else op.__name__
        self.inputs = inputs or {}
        self.consts = consts or {}
        self.variables = variables or {}
        self.attrs = attrs or {}
        self.grad = grad
        self.rtol = rtol
        self.xla = xla
        # False for ops TensorFlow has no CPU kernel for: the XLA values stand for both backends.
        self.cpu = cpu
        # Attrs set on the op's node after it is made ({name: AttrValue proto}): those a kernel reads
        # although the op's definition does not declare them (XlaIf's `output_shapes`).
        self.node_attrs = node_attrs or {}
        # Optional: a function of the arguments standing for the op (see the module's doc).
        self.fn = fn
        # True: the gradients also go to each resource variable (by its handle, as `tf.gradients`
        # differentiates a resource read), recorded under the variable's own node name.
        self.var_grads = var_grads
        if not cpu and not xla:
            raise ValueError(f"case {name!r}: a case needs CPU or XLA values")
        # A function from the op's output tensors to the tensors compared (and weighted in the loss):
        # for outputs unique only up to sign, e.g. eigenvectors compared as `v * v`. None: the outputs.
        self.post = post
        # {arg: quantized tf dtype} for inputs and consts whose values are given as plain integers.
        self.qtypes = qtypes or {}
        # True: also record the gradients TensorFlow's XLA bridge gives ("xla_grads"), for ops whose
        # gradient depends on a sample that the bridge draws differently from the CPU kernel.
        self.xla_grads = xla_grads


def enc(value):
    """A numpy value as {"dtype", "shape", "values"}."""
    a = np.asarray(value)
    dtype = "bfloat16" if a.dtype == tf.bfloat16.as_numpy_dtype else a.dtype.name
    flat = a.reshape(-1)
    if dtype in ("bfloat16", "float16", "float32", "float64"):
        vals = []
        for v in flat.astype(np.float64):
            if np.isnan(v):
                vals.append("nan")
            elif np.isinf(v):
                vals.append("inf" if v > 0 else "-inf")
            else:
                vals.append(float(v))
    elif dtype == "bool":
        vals = [bool(v) for v in flat]
    elif dtype in ("complex64", "complex128"):
        vals = []
        for z in flat.astype(np.complex128):
            for v in (z.real, z.imag):
                if np.isnan(v):
                    vals.append("nan")
                elif np.isinf(v):
                    vals.append("inf" if v > 0 else "-inf")
                else:
                    vals.append(float(v))
    else:
        vals = [int(v) for v in flat]
    return {"dtype": dtype, "shape": list(a.shape), "values": vals}


def weights(case, k, shape):
    """Fixed loss weights for output k of a case: in [-1, 1), never 0, seeded by the names."""
    rng = np.random.default_rng(zlib.crc32(f"{case}/{k}".encode()))
    w = rng.uniform(0.25, 1.0, size=shape) * rng.choice([-1.0, 1.0], size=shape)
    return w.astype(np.float32)


def flatten(result):
    """The tensors a raw op returned, in output order."""
    if result is None or isinstance(result, tf.Operation):
        return []
    if isinstance(result, (tf.Tensor, tf.Variable)):
        return [result]
    out = []
    for item in result:
        out.extend(flatten(item))
    return out


def op_function(op):
    """The raw-op function of `op`: from `tf.raw_ops`, or for the ops TensorFlow runs only under
    XLA (`XlaDot`, `XlaPad`, ...) from tf2xla's generated wrappers, or else from the op's
    registered definition; a function is its own."""
    if callable(op):
        return op
    fn = getattr(tf.raw_ops, op, None)
    if fn is not None:
        return fn
    from tensorflow.compiler.tf2xla.ops import gen_xla_ops

    snake = "".join("_" + c.lower() if c.isupper() else c for c in op).lstrip("_")
    fn = getattr(gen_xla_ops, snake, None)
    if fn is not None:
        return fn
    from tensorflow.python.framework import op_def_library, op_def_registry

    if op_def_registry.get(op) is None:
        raise ValueError(f"TensorFlow has no op {op!r}")

    def registered(name=None, **kwargs):
        """An op with no Python wrapper (`StochasticCastToInt`), made from its registered definition."""
        _, _, made, outputs = op_def_library._apply_op_helper(op, name=name, **kwargs)
        return outputs if outputs else made

    return registered


def set_node_attrs(case, result):
    """Sets `case.node_attrs` on the node that made `result`."""
    if not case.node_attrs:
        return
    op = result if isinstance(result, tf.Operation) else flatten(result)[0].op
    for key, value in case.node_attrs.items():
        op._set_attr(key, value)


def call(case, args):
    if case.fn is not None:
        return case.fn(**args, **case.attrs)
    result = op_function(case.op)(**args, **case.attrs)
    set_node_attrs(case, result)
    return result


def build(case):
    """Adds the case to the default graph: (placeholders, outputs by node name, loss, float xs)."""
    n = case.name
    args, feeds, xs = {}, {}, []
    for arg, value in case.inputs.items():
        values = value if isinstance(value, list) else [value]
        nodes = []
        for i, v in enumerate(values):
            v = np.asarray(v)
            name = f"{n}__{arg}_{i}" if isinstance(value, list) else f"{n}__{arg}"
            p = tf.compat.v1.placeholder(case.qtypes.get(arg, tf.as_dtype(v.dtype)), shape=v.shape, name=name)
            feeds[p] = v
            nodes.append(p)
            if p.dtype in FLOATS:
                xs.append(p)
        args[arg] = nodes if isinstance(value, list) else nodes[0]
    for arg, value in case.consts.items():
        if isinstance(value, list):
            args[arg] = [tf.constant(np.asarray(v), dtype=case.qtypes.get(arg), name=f"{n}__{arg}_{i}")
                         for i, v in enumerate(value)]
        else:
            args[arg] = tf.constant(np.asarray(value), dtype=case.qtypes.get(arg), name=f"{n}__{arg}")
    variables = {}
    for arg, value in case.variables.items():
        v = tf.Variable(np.asarray(value), name=f"{n}__{arg}")
        variables[arg] = v
        args[arg] = v.handle
        if case.var_grads and v.dtype in FLOATS:
            xs.append(v.handle)
    if case.fn is not None:
        with tf.name_scope(f"{n}__op"):
            result = case.fn(**args, **case.attrs)
    else:
        result = op_function(case.op)(**args, **case.attrs, name=f"{n}__op")
        set_node_attrs(case, result)
    op_outputs = flatten(result)
    if case.post is not None:
        with tf.name_scope(f"{n}__post"):
            op_outputs = list(case.post(op_outputs))
    outputs = {}
    for k, t in enumerate(op_outputs):
        outputs[f"{n}__out_{k}"] = tf.identity(t, name=f"{n}__out_{k}")
    deps = [result] if isinstance(result, tf.Operation) else op_outputs
    for arg, v in variables.items():
        with tf.control_dependencies(deps):
            outputs[f"{n}__var_{arg}"] = tf.identity(
                tf.raw_ops.ReadVariableOp(resource=v.handle, dtype=v.dtype), name=f"{n}__var_{arg}")
    terms = []
    wide = any(t.dtype == tf.float64 for t in op_outputs)
    loss_type = tf.float64 if wide else tf.float32
    with tf.name_scope(f"{n}__terms"):
        for k, t in enumerate(op_outputs):
            if t.dtype in FLOATS and t.shape.is_fully_defined():
                w = tf.constant(weights(n, k, t.shape.as_list()), name=f"w_{k}")
                terms.append(tf.reduce_sum(tf.cast(t, loss_type) * tf.cast(w, loss_type)))
    loss = tf.identity(tf.add_n(terms), name=f"{n}__loss") if terms else None
    return feeds, outputs, loss, xs, variables


def xla_values(case, feeds_by_arg):
    """The case's outputs under TensorFlow's XLA bridge and, for a `cpu=False` case that asks for
    them, its gradients there ([{"x", "value"}], as `tf.GradientTape` gives them); or
    (None, None, why)."""
    try:
        variables = {arg: tf.Variable(np.asarray(v)) for arg, v in case.variables.items()}
        consts = {arg: ([tf.constant(np.asarray(v), dtype=case.qtypes.get(arg)) for v in value] if isinstance(value, list)
                        else tf.constant(np.asarray(value), dtype=case.qtypes.get(arg)))
                  for arg, value in case.consts.items()}
        # The fed tensors by placeholder name, in the order `build` names them.
        names = []
        for arg, value in feeds_by_arg.items():
            if isinstance(value, list):
                names.extend(f"{case.name}__{arg}_{i}" for i in range(len(value)))
            else:
                names.append(f"{case.name}__{arg}")
        want_grads = case.grad and (not case.cpu or case.xla_grads)
        no_gradient = []

        @tf.function(jit_compile=True)
        def step(fed):
            flat = [t for value in fed.values() for t in (value if isinstance(value, list) else [value])]
            watched = [t for t in flat if t.dtype in FLOATS]
            with tf.GradientTape() as tape:
                tape.watch(watched)
                args = dict(fed)
                args.update(consts)
                args.update({arg: v.handle for arg, v in variables.items()})
                result = call(case, args)
                outs = flatten(result)
                if case.post is not None:
                    outs = list(case.post(outs))
                wide = any(t.dtype == tf.float64 for t in outs)
                loss_type = tf.float64 if wide else tf.float32
                terms = [tf.reduce_sum(tf.cast(t, loss_type) * tf.cast(weights(case.name, k, t.shape.as_list()), loss_type))
                         for k, t in enumerate(outs) if t.dtype in FLOATS and t.shape.is_fully_defined()]
                loss = tf.add_n(terms) if terms else None
            grads = []
            if want_grads and loss is not None and watched:
                try:
                    grads = tape.gradient(loss, watched)
                except LookupError:  # TensorFlow registers no gradient for the op.
                    no_gradient.append(True)
            reads = []
            with tf.control_dependencies([result] if isinstance(result, tf.Operation) else outs):
                for v in variables.values():
                    reads.append(v.read_value())
            return outs, reads, [g if g is not None else tf.zeros([0]) for g in grads], [g is not None for g in grads]

        fed = {arg: ([tf.constant(v, dtype=case.qtypes.get(arg)) for v in value] if isinstance(value, list)
                     else tf.constant(value, dtype=case.qtypes.get(arg)))
               for arg, value in feeds_by_arg.items()}
        outs, reads, grads, present = step(fed)
        values = {f"{case.name}__out_{k}": enc(t.numpy()) for k, t in enumerate(outs)}
        for arg, t in zip(variables, reads):
            values[f"{case.name}__var_{arg}"] = enc(t.numpy())
        float_names = [n for n, t in zip(names, [t for value in fed.values()
                                                  for t in (value if isinstance(value, list) else [value])])
                       if t.dtype in FLOATS]
        tape_grads = None
        if want_grads and not no_gradient:
            tape_grads = [{"x": x, "value": enc(g.numpy())} for x, g, ok in zip(float_names, grads, present) if ok]
        return values, tape_grads, None
    except Exception as e:  # TensorFlow's bridge refuses the op or its attrs.
        return None, None, f"{type(e).__name__}: {' '.join(str(e).split())[:600]}"


def write_family(family, cases):
    names = [c.name for c in cases]
    if len(set(names)) != len(names):
        raise ValueError("case names must be unique")
    # Ops without a CPU kernel go to a graph of their own: a session places its whole graph.
    graph, xla_graph = tf.Graph(), tf.Graph()
    built = []
    for case in cases:
        with (graph if case.cpu else xla_graph).as_default():
            built.append(build(case))
    with graph.as_default():
        init = tf.compat.v1.global_variables_initializer()
    # The graphs as written: TensorFlow's own gradient nodes, added below, stay out of them.
    graph_def = graph.as_graph_def()
    xla_def = xla_graph.as_graph_def()
    graph_def.node.extend(xla_def.node)
    # Function-valued attrs (reducers, comparators, branches: a concrete `tf.function` passed as the
    # attr) put their functions in a graph's library; the written GraphDef holds both libraries.
    have = {f.signature.name for f in graph_def.library.function}
    graph_def.library.function.extend(f for f in xla_def.library.function if f.signature.name not in have)
    records = []
    with tf.compat.v1.Session(graph=graph) as sess:
        sess.run(init)
        for case, (feeds, outputs, loss, xs, _variables) in zip(cases, built):
            if not case.cpu:
                # No CPU kernel: the XLA values, below, stand for both backends.
                records.append({"name": case.name, "op": case.op_name, "rtol": case.rtol, "cpu": False,
                                "feeds": {p.op.name: enc(v) for p, v in feeds.items()}, "outputs": None,
                                "grads": None})
                continue
            grads, grad_error = None, None
            if case.grad and loss is not None and xs:
                with graph.as_default():
                    try:
                        gs = tf.gradients(loss, xs)
                    except LookupError as e:
                        gs, grad_error = None, f"LookupError: {e}"
                if gs is not None:
                    with graph.as_default():
                        # A sparse gradient (IndexedSlices) is compared as the dense tensor it stands for.
                        grads = [(x, tf.convert_to_tensor(g)) for x, g in zip(xs, gs) if g is not None]
            elif not case.grad:
                grad_error = "the case asks for no gradient"
            fetch = dict(outputs)
            grad_fetch = [g for _, g in grads] if grads else []
            values, grad_values = sess.run((fetch, grad_fetch), feed_dict=feeds)
            record = {
                "name": case.name,
                "op": case.op_name,
                "rtol": case.rtol,
                "feeds": {p.op.name: enc(v) for p, v in feeds.items()},
                "outputs": {k: enc(v) for k, v in values.items()},
                "grads": None if grads is None else [
                    {"x": x.op.name, "value": enc(v)} for (x, _), v in zip(grads, grad_values)],
            }
            if grad_error:
                record["grad_error"] = grad_error
            records.append(record)
    # Eagerly, outside the session (whose context makes the graph the default one).
    for case, record in zip(cases, records):
        if case.xla:
            by_arg = {}
            for arg, value in case.inputs.items():
                by_arg[arg] = [np.asarray(v) for v in value] if isinstance(value, list) else np.asarray(value)
            xla, tape_grads, why = xla_values(case, by_arg)
            record["xla"] = xla
            if why:
                record["xla_error"] = why
            if case.cpu and case.xla_grads:
                record["xla_grads"] = tape_grads
            if not case.cpu:
                if xla is None:
                    raise SystemExit(f"{case.name}: an XLA-only case that TensorFlow's bridge refuses: {why}")
                record["outputs"] = xla
                record["grads"] = tape_grads
                if case.grad and tape_grads is None:
                    record["grad_error"] = "TensorFlow gives no gradient"
        else:
            record["xla"] = None
            record["xla_error"] = "the case asks for no XLA value"
    os.makedirs(OUT, exist_ok=True)
    doc = {"tensorflow": tf.__version__, "family": family, "cases": records}
    for suffix, text in ((".pbtxt", str(graph_def)),
                         (".json", json.dumps(doc, separators=(",", ":")) + "\n")):
        path = os.path.join(OUT, family + suffix)
        with open(path + ".tmp", "w") as f:
            f.write(text)
        os.replace(path + ".tmp", path)
    compiled = sum(1 for r in records if r["xla"] is not None)
    print(f"wrote {family}: {len(records)} cases, {compiled} with XLA values", file=sys.stderr)
