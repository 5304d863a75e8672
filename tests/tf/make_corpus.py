"""Writes tests/tf/corpus/: small TensorFlow graphs, one per op family, with TF's own numbers.

Run after setup.sh:  tests/tf/.venv/bin/python tests/tf/make_corpus.py

For each case NAME it writes
  NAME.pbtxt     the GraphDef, as str(graph_def);
  NAME.json      {"kind": "plain" | "replicated", "num_replicas", "feeds": {tensor: T},
                  "runs": [{"targets": [op], "fetches": {tensor: T}}], "rtol"}
                 with T = {"dtype", "shape", "values" (flat, row-major)};
  NAME.tags.json (replicated cases) for every node: "op", and "R" / "OC" where TF set them.

Plain cases run as written: the runs execute in order in one session (variables persist), so
"init" then a training op then reads of the variables shows an optimizer's update. Replicated
cases are built with tpu.replicate; TF cannot run them on CPU, so their numbers come from the same
step function run once per replica in a plain graph, fetched as output_{i}_shard_{r}:0.
"""

import json
import os
import sys

os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.python.tpu import tpu  # noqa: E402

tf1 = tf.compat.v1
tf1.disable_eager_execution()

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def enc(value):
    """A numpy value as {"dtype", "shape", "values"}."""
    a = np.asarray(value)
    dtype = a.dtype.name
    if a.dtype == tf.bfloat16.as_numpy_dtype:
        dtype = "bfloat16"
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
    else:
        vals = [int(v) for v in flat]
    return {"dtype": dtype, "shape": list(a.shape), "values": vals}


def tensor_name(t):
    return t.name if isinstance(t, tf.Tensor) else t.name


def write(name, graph, meta, tags=None):
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, name + ".pbtxt"), "w") as f:
        f.write(str(graph.as_graph_def()))
    with open(os.path.join(OUT, name + ".json"), "w") as f:
        json.dump(meta, f, indent=None, separators=(",", ":"))
        f.write("\n")
    if tags is not None:
        with open(os.path.join(OUT, name + ".tags.json"), "w") as f:
            json.dump(tags, f, indent=1, sort_keys=True)
            f.write("\n")
    print("wrote", name, file=sys.stderr)


def plain_case(name, build, runs_spec, rtol=1e-4):
    """build() -> (feeds {placeholder: value}, named {key: tensor-or-op}); runs_spec: [(targets, fetch keys)]."""
    g = tf.Graph()
    with g.as_default():
        tf1.set_random_seed(1)
        feeds, named = build()
        with tf1.Session(graph=g) as sess:
            feed_dict = {p: v for p, v in feeds.items()}
            runs = []
            for targets, keys in runs_spec:
                ops = [named[t] for t in targets]
                tensors = [named[k] for k in keys]
                values = sess.run(ops + tensors, feed_dict=feed_dict)[len(ops):]
                runs.append(
                    {
                        "targets": [named[t].name for t in targets],
                        "fetches": {t.name: enc(v) for t, v in zip(tensors, values)},
                    }
                )
    meta = {
        "kind": "plain",
        "num_replicas": 1,
        "feeds": {p.name: enc(v) for p, v in feeds.items()},
        "runs": runs,
        "rtol": rtol,
    }
    write(name, g, meta)


def rng(seed):
    return np.random.default_rng(seed)


def f32(seed, *shape, scale=1.0):
    return (rng(seed).standard_normal(shape) * scale).astype(np.float32)


# ---------------------------------------------------------------- optimizers


def optimizers():
    def build():
        named = {}
        grad = tf.constant(f32(1, 3, 2), name="grad")
        lr = tf.constant(0.1, name="lr")
        mom = tf.constant(0.9, name="momentum")
        variables = {}

        def var(n, value):
            v = tf1.Variable(value, name=n, use_resource=True)
            variables[n] = v
            return v

        w0 = f32(2, 3, 2)
        sgd = var("sgd", w0)
        mw, ma = var("mom_w", w0), var("mom_a", np.zeros((3, 2), np.float32))
        nw, na = var("nest_w", w0), var("nest_a", np.zeros((3, 2), np.float32))
        kw, ka = var("kmom_w", w0), var("kmom_a", np.zeros((3, 2), np.float32))
        knw, kna = var("kn_w", w0), var("kn_a", np.zeros((3, 2), np.float32))
        aw, am, av = var("adam_w", w0), var("adam_m", np.zeros((3, 2), np.float32)), var(
            "adam_v", np.zeros((3, 2), np.float32)
        )
        anw, anm, anv = var("adamn_w", w0), var("adamn_m", np.zeros((3, 2), np.float32)), var(
            "adamn_v", np.zeros((3, 2), np.float32)
        )
        gw, ga = var("adagrad_w", w0), var("adagrad_a", np.full((3, 2), 0.1, np.float32))
        rw, rms, rmom = var("rms_w", w0), var("rms_ms", np.ones((3, 2), np.float32)), var(
            "rms_mom", np.zeros((3, 2), np.float32)
        )
        emb = var("emb", f32(3, 5, 3))
        emb_sub = var("emb_sub", f32(3, 5, 3))
        emb_set = var("emb_set", f32(3, 5, 3))
        rows = tf.constant([3, 0, 3], name="rows")
        row_updates = tf.constant(f32(4, 3, 3), name="row_updates")
        sub = var("sub_w", w0)
        add = var("add_w", w0)
        named["init"] = tf1.global_variables_initializer()
        t = tf.constant(2.0)
        b1, b2 = tf.constant(0.9), tf.constant(0.999)
        updates = [
            tf.raw_ops.ResourceApplyGradientDescent(var=sgd.handle, alpha=lr, delta=grad),
            tf.raw_ops.ResourceApplyMomentum(var=mw.handle, accum=ma.handle, lr=lr, grad=grad, momentum=mom),
            tf.raw_ops.ResourceApplyMomentum(
                var=nw.handle, accum=na.handle, lr=lr, grad=grad, momentum=mom, use_nesterov=True
            ),
            tf.raw_ops.ResourceApplyKerasMomentum(var=kw.handle, accum=ka.handle, lr=lr, grad=grad, momentum=mom),
            tf.raw_ops.ResourceApplyKerasMomentum(
                var=knw.handle, accum=kna.handle, lr=lr, grad=grad, momentum=mom, use_nesterov=True
            ),
            tf.raw_ops.ResourceApplyAdam(
                var=aw.handle, m=am.handle, v=av.handle, beta1_power=tf.pow(b1, t), beta2_power=tf.pow(b2, t),
                lr=lr, beta1=b1, beta2=b2, epsilon=tf.constant(1e-7), grad=grad,
            ),
            tf.raw_ops.ResourceApplyAdam(
                var=anw.handle, m=anm.handle, v=anv.handle, beta1_power=tf.pow(b1, t), beta2_power=tf.pow(b2, t),
                lr=lr, beta1=b1, beta2=b2, epsilon=tf.constant(1e-7), grad=grad, use_nesterov=True,
            ),
            tf.raw_ops.ResourceApplyAdagrad(var=gw.handle, accum=ga.handle, lr=lr, grad=grad),
            tf.raw_ops.ResourceApplyRMSProp(
                var=rw.handle, ms=rms.handle, mom=rmom.handle, lr=lr, rho=tf.constant(0.9), momentum=mom,
                epsilon=tf.constant(1e-7), grad=grad,
            ),
            tf.raw_ops.AssignSubVariableOp(resource=sub.handle, value=lr * grad),
            # Sparse (IndexedSlices) updates of an embedding table; row 3 is updated twice.
            tf.raw_ops.ResourceScatterAdd(resource=emb.handle, indices=rows, updates=row_updates),
            tf.raw_ops.ResourceScatterSub(resource=emb_sub.handle, indices=rows, updates=row_updates),
            tf.raw_ops.ResourceScatterUpdate(resource=emb_set.handle, indices=rows[:2], updates=row_updates[:2]),
            tf.raw_ops.AssignAddVariableOp(resource=add.handle, value=lr * grad),
        ]
        named["train"] = tf.group(*updates, name="train")
        for n, v in variables.items():
            named[n] = tf.identity(v.read_value(), name="read_" + n)
        return {}, named

    names = [
        "sgd", "mom_w", "mom_a", "nest_w", "nest_a", "kmom_w", "kmom_a", "kn_w", "kn_a", "adam_w", "adam_m",
        "adam_v", "adamn_w", "adagrad_w", "adagrad_a", "rms_w", "rms_ms", "rms_mom", "sub_w", "add_w", "emb",
        "emb_sub", "emb_set",
    ]
    # Reads get a run of their own: within one run TF does not order them after the updates.
    plain_case("optimizers", build, [(["init"], []), (["train"], []), (["train"], []), ([], names)])


# ---------------------------------------------------------------- reductions and math


def math_ops():
    def build():
        x = tf1.placeholder(tf.float32, [3, 4], name="x")
        y = tf1.placeholder(tf.float32, [3, 4], name="y")
        p = tf1.placeholder(tf.float32, [3, 4], name="p")
        i = tf1.placeholder(tf.int32, [6], name="i")
        j = tf1.placeholder(tf.int32, [6], name="j")
        b = tf1.placeholder(tf.bool, [4], name="b")
        c = tf1.placeholder(tf.bool, [4], name="c")
        bias = tf1.placeholder(tf.float32, [4], name="bias")
        a3 = tf1.placeholder(tf.float32, [2, 3, 4], name="a3")
        b3 = tf1.placeholder(tf.float32, [2, 4, 5], name="b3")
        b1 = tf1.placeholder(tf.float32, [4, 5], name="b1")
        n = {}
        n["max"] = tf.reduce_max(x, axis=1, name="max")
        n["min"] = tf.reduce_min(x, axis=0, keepdims=True, name="min")
        n["prod"] = tf.reduce_prod(x, axis=[0, 1], name="prod")
        n["any"] = tf.reduce_any(b, name="any")
        n["all"] = tf.reduce_all(tf.stack([b, c]), axis=0, name="all")
        n["sqrt"] = tf.sqrt(p, name="sqrt")
        n["rsqrt"] = tf.math.rsqrt(p, name="rsqrt")
        n["sqrt_grad"] = tf.raw_ops.SqrtGrad(y=n["sqrt"], dy=x, name="sqrt_grad")
        n["rsqrt_grad"] = tf.raw_ops.RsqrtGrad(y=n["rsqrt"], dy=x, name="rsqrt_grad")
        n["pow"] = tf.pow(p, y, name="pow")
        n["ipow"] = tf.pow(i, tf.constant([0, 1, 2, 3, 2, 1]), name="ipow")
        n["abs"] = tf.abs(x, name="abs")
        n["sign"] = tf.sign(x, name="sign")
        n["round"] = tf.round(x * 2.0, name="round")
        n["floor"] = tf.floor(x, name="floor")
        n["floordiv"] = tf.math.floordiv(x, y, name="floordiv")
        n["floormod"] = tf.math.floormod(x, y, name="floormod")
        n["ifloordiv"] = tf.math.floordiv(i, j, name="ifloordiv")
        n["ifloormod"] = tf.math.floormod(i, j, name="ifloormod")
        q = x / (y - y)
        n["isfinite"] = tf.math.is_finite(q, name="isfinite")
        n["isnan"] = tf.math.is_nan(q, name="isnan")
        n["and"] = tf.logical_and(b, c, name="and")
        n["or"] = tf.logical_or(b, c, name="or")
        n["not"] = tf.logical_not(b, name="not")
        n["less"] = tf.less(x, y, name="less")
        n["less_equal"] = tf.less_equal(i, j, name="less_equal")
        n["greater"] = tf.greater(x, 0.0, name="greater")
        n["greater_equal"] = tf.greater_equal(x, y, name="greater_equal")
        n["equal"] = tf.equal(i, j, name="equal")
        n["not_equal"] = tf.not_equal(b, c, name="not_equal")
        n["erf"] = tf.math.erf(x, name="erf")
        n["square"] = tf.square(x, name="square")
        n["sqdiff"] = tf.math.squared_difference(x, y, name="sqdiff")
        n["addn"] = tf.add_n([x, y, p], name="addn")
        n["bias_add"] = tf.nn.bias_add(x, bias, name="bias_add")
        n["bias_add_grad"] = tf.raw_ops.BiasAddGrad(out_backprop=a3, name="bias_add_grad")
        n["einsum_mm"] = tf.einsum("ij,jk->ik", x, b1, name="einsum_mm")
        n["einsum_bmm"] = tf.einsum("bij,bjk->bik", a3, b3, name="einsum_bmm")
        n["einsum_outer"] = tf.einsum("i,j->ij", bias, bias, name="einsum_outer")
        n["einsum_t"] = tf.einsum("bij->bji", a3, name="einsum_t")
        n["einsum_dot"] = tf.einsum("ij,ij->i", x, y, name="einsum_dot")
        # Transformer forms: a dense layer on [batch, seq, d] and attention scores / values.
        n["einsum_dense"] = tf.einsum("bsd,df->bsf", a3, b1, name="einsum_dense")
        q = tf.reshape(a3, [1, 2, 3, 4])
        n["einsum_scores"] = tf.einsum("bhqd,bhkd->bhqk", q, q, name="einsum_scores")
        n["einsum_values"] = tf.einsum("bhqk,bhkd->bqhd", n["einsum_scores"], q, name="einsum_values")
        n["bmm_v2"] = tf.raw_ops.BatchMatMulV2(x=a3, y=b1, name="bmm_v2")
        n["bmm_v3"] = tf.raw_ops.BatchMatMulV3(x=a3, y=b3, Tout=tf.float32, adj_x=False, name="bmm_v3")
        n["bmm_adj"] = tf.raw_ops.BatchMatMulV2(x=a3, y=a3, adj_y=True, name="bmm_adj")
        n["cumsum"] = tf.cumsum(x, axis=1, name="cumsum")
        n["cumsum_ex"] = tf.cumsum(x, axis=0, exclusive=True, reverse=True, name="cumsum_ex")
        n["icumsum"] = tf.cumsum(i, name="icumsum")
        n["argmax"] = tf.argmax(x, axis=1, name="argmax")
        n["argmin"] = tf.argmin(x, axis=0, output_type=tf.int32, name="argmin")
        n["exp"] = tf.exp(x, name="exp")
        n["log1p"] = tf.math.log1p(p, name="log1p")
        n["maximum"] = tf.maximum(x, y, name="maximum")
        n["sum64"] = tf.reduce_sum(tf.cast(i, tf.int64), name="sum64")
        feeds = {
            x: f32(10, 3, 4),
            y: np.abs(f32(11, 3, 4)) + 0.5,
            p: np.abs(f32(12, 3, 4)) + 0.1,
            i: np.array([7, -7, 7, -7, 3, 0], np.int32),
            j: np.array([2, 2, -2, -2, 3, 5], np.int32),
            b: np.array([True, False, True, True]),
            c: np.array([True, True, False, True]),
            bias: f32(13, 4),
            a3: f32(14, 2, 3, 4),
            b3: f32(15, 2, 4, 5),
            b1: f32(16, 4, 5),
        }
        return feeds, n

    keys = [
        "max", "min", "prod", "any", "all", "sqrt", "rsqrt", "sqrt_grad", "rsqrt_grad", "pow", "ipow", "abs",
        "sign", "round", "floor", "floordiv", "floormod", "ifloordiv", "ifloormod", "isfinite", "isnan", "and",
        "or", "not", "less", "less_equal", "greater", "greater_equal", "equal", "not_equal", "erf", "square",
        "sqdiff", "addn", "bias_add", "bias_add_grad", "einsum_mm", "einsum_bmm", "einsum_outer", "einsum_t",
        "einsum_dot", "einsum_dense", "einsum_scores", "einsum_values", "bmm_v2", "bmm_v3", "bmm_adj", "cumsum", "cumsum_ex", "icumsum", "argmax", "argmin", "exp",
        "log1p", "maximum", "sum64",
    ]
    plain_case("math", build, [([], keys)])


# ---------------------------------------------------------------- losses and activations


def losses():
    def build():
        logits = tf1.placeholder(tf.float32, [4, 5], name="logits")
        probs = tf1.placeholder(tf.float32, [4, 5], name="probs")
        labels = tf1.placeholder(tf.int32, [4], name="labels")
        x = tf1.placeholder(tf.float32, [3, 4], name="x")
        n = {}
        xent = tf.nn.softmax_cross_entropy_with_logits(labels=probs, logits=logits, name="xent")
        sxent = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits, name="sxent")
        n["xent"] = xent
        n["sxent"] = sxent
        n["log_softmax"] = tf.nn.log_softmax(logits, name="log_softmax")
        n["softmax"] = tf.nn.softmax(logits, name="softmax")
        n["one_hot"] = tf.one_hot(labels, 5, on_value=2.0, off_value=-1.0, name="one_hot")
        n["one_hot_axis0"] = tf.one_hot(labels, 5, axis=0, name="one_hot_axis0")
        n["l2loss"] = tf.nn.l2_loss(x, name="l2loss")
        acts = {
            "relu6": tf.nn.relu6(x * 4.0, name="relu6"),
            "elu": tf.nn.elu(x, name="elu"),
            "selu": tf.nn.selu(x, name="selu"),
            "gelu": tf.nn.gelu(x, approximate=False, name="gelu"),
            "gelu_tanh": tf.nn.gelu(x, approximate=True, name="gelu_tanh"),
            "softplus": tf.nn.softplus(x, name="softplus"),
            "leaky_relu": tf.nn.leaky_relu(x, alpha=0.3, name="leaky_relu"),
            "relu": tf.nn.relu(x, name="relu"),
            "sigmoid": tf.nn.sigmoid(x, name="sigmoid"),
            "tanh": tf.nn.tanh(x, name="tanh"),
        }
        n.update(acts)
        loss = tf.reduce_sum(xent) + tf.reduce_sum(sxent) + tf.reduce_sum(n["log_softmax"] * probs)
        loss = loss + n["l2loss"]
        for k, v in acts.items():
            loss = loss + tf.reduce_sum(v * (1.0 + x))
        gl, gx = tf.gradients(loss, [logits, x])
        n["grad_logits"] = tf.identity(gl, name="grad_logits")
        n["grad_x"] = tf.identity(gx, name="grad_x")
        n["loss"] = tf.identity(loss, name="loss")
        p = np.abs(f32(21, 4, 5)) + 0.1
        feeds = {
            logits: f32(20, 4, 5, scale=2.0),
            probs: (p / p.sum(axis=1, keepdims=True)).astype(np.float32),
            labels: np.array([0, 3, 4, 1], np.int32),
            x: f32(22, 3, 4, scale=1.5),
        }
        return feeds, n

    keys = [
        "xent", "sxent", "log_softmax", "softmax", "one_hot", "one_hot_axis0", "l2loss", "relu6", "elu", "selu",
        "gelu", "gelu_tanh", "softplus", "leaky_relu", "grad_logits", "grad_x", "loss",
    ]
    plain_case("losses", build, [([], keys)])


# ---------------------------------------------------------------- shape


def shape_ops():
    def build():
        x = tf1.placeholder(tf.float32, [2, 3, 4], name="x")
        y = tf1.placeholder(tf.float32, [2, 3, 4], name="y")
        m = tf1.placeholder(tf.bool, [2, 3, 4], name="m")
        v = tf1.placeholder(tf.float32, [6], name="v")
        n = {}
        n["expand"] = tf.expand_dims(v, -1, name="expand")
        n["squeeze"] = tf.squeeze(tf.reshape(v, [1, 6, 1]), axis=[0], name="squeeze")
        n["squeeze_all"] = tf.squeeze(tf.reshape(v, [1, 6, 1]), name="squeeze_all")
        n["concat"] = tf.concat([x, y], axis=-1, name="concat")
        n["pack"] = tf.stack([v, v * 2.0], axis=1, name="pack")
        un = tf.unstack(x, axis=1, name="unpack")
        n["unpack1"] = un[1]
        sp = tf.split(x, 2, axis=2, name="split")
        n["split1"] = sp[1]
        spv = tf.split(v, [1, 2, 3], axis=0, name="splitv")
        n["splitv2"] = spv[2]
        n["slice"] = tf.slice(x, [0, 1, 1], [2, -1, 2], name="slice")
        n["ss_basic"] = tf.identity(x[:, 1:, ::2], name="ss_basic")
        n["ss_neg"] = tf.identity(x[::-1, -2:, 3], name="ss_neg")
        n["ss_newaxis"] = tf.identity(x[tf.newaxis, ..., 1:3], name="ss_newaxis")
        n["ss_shrink"] = tf.identity(x[1, 2], name="ss_shrink")
        n["ss_ellipsis"] = tf.identity(x[..., -1], name="ss_ellipsis")
        n["ss_step"] = tf.identity(v[5:0:-2], name="ss_step")
        n["shape"] = tf.shape(x, name="shape")
        sn = tf.raw_ops.ShapeN(input=[x, v], name="shape_n")
        n["shape_n1"] = sn[1]
        n["size"] = tf.size(x, name="size")
        n["rank"] = tf.rank(x, name="rank")
        n["select"] = tf.raw_ops.Select(condition=m, x=x, y=y, name="select")
        n["select_v2"] = tf.where(m[0, 0], x, 0.0, name="select_v2")
        n["where"] = tf.where(m, name="where")
        n["pad"] = tf.pad(x, [[1, 0], [0, 2], [1, 1]], constant_values=3.0, name="pad")
        n["range"] = tf.range(2, 11, 3, name="range")
        n["frange"] = tf.range(0.5, 2.0, 0.25, name="frange")
        n["zeros_like"] = tf.zeros_like(x, name="zeros_like")
        n["ones_like"] = tf.ones_like(m, name="ones_like")
        n["bargs"] = tf.raw_ops.BroadcastArgs(s0=tf.constant([2, 1, 4]), s1=tf.constant([3, 1]), name="bargs")
        bga = tf.raw_ops.BroadcastGradientArgs(s0=tf.constant([2, 1, 4]), s1=tf.constant([3, 1]), name="bga")
        n["bga0"], n["bga1"] = bga[0], bga[1]
        n["tile"] = tf.tile(v, [2], name="tile")
        n["transpose"] = tf.transpose(x, [2, 0, 1], name="transpose")
        n["fill"] = tf.fill([2, 2], 7, name="fill")
        loss = (
            tf.reduce_sum(n["ss_basic"] * 2.0)
            + tf.reduce_sum(n["ss_neg"] * 3.0)
            + tf.reduce_sum(n["ss_shrink"])
            + tf.reduce_sum(n["concat"] * n["concat"])
            + tf.reduce_sum(n["slice"] * 5.0)
            + tf.reduce_sum(n["pad"] * n["pad"])
            + tf.reduce_sum(n["select"] * 7.0)
            + tf.reduce_sum(un[2] * 11.0)
            + tf.reduce_sum(sp[0] * 13.0)
            + tf.reduce_sum(n["transpose"] * x[0, 0, 0])
        )
        gx, gv = tf.gradients(loss + tf.reduce_sum(n["pack"] * n["pack"]) + tf.reduce_sum(spv[1] * 3.0), [x, v])
        n["grad_x"] = tf.identity(gx, name="grad_x")
        n["grad_v"] = tf.identity(gv, name="grad_v")
        n["ssg"] = tf.raw_ops.StridedSliceGrad(
            shape=[2, 3, 4], begin=[0, 1, 0], end=[2, 3, 4], strides=[1, 1, 2], dy=tf.ones([2, 2, 2]), name="ssg"
        )
        feeds = {
            x: f32(30, 2, 3, 4),
            y: f32(31, 2, 3, 4),
            m: rng(32).random((2, 3, 4)) > 0.5,
            v: f32(33, 6),
        }
        return feeds, n

    keys = [
        "expand", "squeeze", "squeeze_all", "concat", "pack", "unpack1", "split1", "splitv2", "slice", "ss_basic",
        "ss_neg", "ss_newaxis", "ss_shrink", "ss_ellipsis", "ss_step", "shape", "shape_n1", "size", "rank",
        "select", "select_v2", "where", "pad", "range", "frange", "zeros_like", "ones_like", "bargs", "bga0",
        "bga1", "tile", "transpose", "fill", "grad_x", "grad_v", "ssg",
    ]
    plain_case("shape", build, [([], keys)])


# ---------------------------------------------------------------- embeddings


def embeddings():
    def build():
        ids = tf1.placeholder(tf.int32, [5], name="ids")
        x = tf1.placeholder(tf.float32, [6, 3], name="x")
        nd = tf1.placeholder(tf.int64, [4, 2], name="nd")
        n = {}
        table = tf1.Variable(f32(40, 6, 3), name="table", use_resource=True)
        n["init"] = tf1.global_variables_initializer()
        emb = tf.nn.embedding_lookup(table, ids, name="lookup")
        n["lookup"] = tf.identity(emb, name="lookup_out")
        n["gather"] = tf.gather(x, ids, name="gather")
        n["gather_axis1"] = tf.gather(x, [2, 0], axis=1, name="gather_axis1")
        n["gather_nd"] = tf.gather_nd(x, nd, name="gather_nd")
        n["segsum"] = tf.math.unsorted_segment_sum(x, [0, 2, 0, 1, 2, 0], 4, name="segsum")
        n["scatter_nd"] = tf.scatter_nd(nd, tf.constant([1.0, 2.0, 3.0, 4.0]), [6, 3], name="scatter_nd")
        n["tsu"] = tf.tensor_scatter_nd_update(x, [[1], [4]], tf.ones([2, 3]), name="tsu")
        loss = tf.reduce_sum(emb * emb) + tf.reduce_sum(n["gather"] * 2.0) + tf.reduce_sum(n["gather_nd"] * 3.0)
        gt, gx = tf.gradients(loss, [table.handle, x])
        n["grad_table"] = tf.identity(tf.convert_to_tensor(gt), name="grad_table")
        n["grad_x"] = tf.identity(gx, name="grad_x")
        feeds = {
            ids: np.array([1, 4, 1, 5, 0], np.int32),
            x: f32(41, 6, 3),
            nd: np.array([[0, 1], [5, 2], [3, 0], [0, 1]], np.int64),
        }
        return feeds, n

    keys = ["lookup", "gather", "gather_axis1", "gather_nd", "segsum", "scatter_nd", "tsu", "grad_table", "grad_x"]
    plain_case("embeddings", build, [(["init"], []), ([], keys)])


# ---------------------------------------------------------------- normalisation


def batchnorm():
    def build():
        x = tf1.placeholder(tf.float32, [2, 3, 3, 4], name="x")
        scale = tf1.placeholder(tf.float32, [4], name="scale")
        offset = tf1.placeholder(tf.float32, [4], name="offset")
        mean = tf1.placeholder(tf.float32, [4], name="mean")
        var = tf1.placeholder(tf.float32, [4], name="var")
        n = {}
        y, bm, bv = tf1.nn.fused_batch_norm(x, scale, offset, epsilon=1e-3, is_training=True, name="bn_train")[:3]
        n["y"], n["batch_mean"], n["batch_var"] = y, bm, bv
        yi = tf1.nn.fused_batch_norm(
            x, scale, offset, mean=mean, variance=var, epsilon=1e-3, is_training=False, name="bn_infer"
        )[0]
        n["y_infer"] = yi
        # Layer norm as Keras writes it: Mean, SquaredDifference, Rsqrt.
        mu = tf.reduce_mean(x, axis=-1, keepdims=True)
        sigma2 = tf.reduce_mean(tf.math.squared_difference(x, mu), axis=-1, keepdims=True)
        ln = (x - mu) * tf.math.rsqrt(sigma2 + 1e-3) * scale + offset
        n["layer_norm"] = tf.identity(ln, name="layer_norm")
        loss = tf.reduce_sum(y * y * x) + tf.reduce_sum(yi * x) + tf.reduce_sum(ln * ln * x)
        gx, gs, go = tf.gradients(loss, [x, scale, offset])
        n["grad_x"] = tf.identity(gx, name="grad_x")
        n["grad_scale"] = tf.identity(gs, name="grad_scale")
        n["grad_offset"] = tf.identity(go, name="grad_offset")
        feeds = {
            x: f32(50, 2, 3, 3, 4),
            scale: f32(51, 4) + 1.0,
            offset: f32(52, 4),
            mean: f32(53, 4),
            var: np.abs(f32(54, 4)) + 0.5,
        }
        return feeds, n

    keys = ["y", "batch_mean", "batch_var", "y_infer", "layer_norm", "grad_x", "grad_scale", "grad_offset"]
    plain_case("batchnorm", build, [([], keys)])


# ---------------------------------------------------------------- conv and pooling


def conv():
    def build():
        x = tf1.placeholder(tf.float32, [2, 5, 6, 3], name="x")
        k = tf1.placeholder(tf.float32, [3, 2, 3, 4], name="k")
        dk = tf1.placeholder(tf.float32, [3, 3, 3, 2], name="dk")
        n = {}
        n["conv_same"] = tf.nn.conv2d(x, k, strides=1, padding="SAME", name="conv_same")
        n["conv_valid"] = tf.nn.conv2d(x, k, strides=[1, 2, 2, 1], padding="VALID", name="conv_valid")
        n["conv_dil"] = tf.nn.conv2d(x, k, strides=1, padding="SAME", dilations=2, name="conv_dil")
        n["dw"] = tf.nn.depthwise_conv2d(x, dk, strides=[1, 2, 2, 1], padding="SAME", name="dw")
        n["maxpool"] = tf.nn.max_pool2d(x, 2, 2, "VALID", name="maxpool")
        n["maxpool_same"] = tf.nn.max_pool2d(x, 3, [1, 2], "SAME", name="maxpool_same")
        n["avgpool"] = tf.nn.avg_pool2d(x, [2, 3], 1, "SAME", name="avgpool")
        n["avgpool_valid"] = tf.nn.avg_pool2d(x, 2, 2, "VALID", name="avgpool_valid")
        # CPU has no dilated Conv2D backprop: conv_dil stays out of the loss.
        loss = sum(tf.reduce_sum(v * v) for key, v in n.items() if key != "conv_dil")
        gx, gk, gdk = tf.gradients(loss, [x, k, dk])
        n["grad_x"] = tf.identity(gx, name="grad_x")
        n["grad_k"] = tf.identity(gk, name="grad_k")
        n["grad_dk"] = tf.identity(gdk, name="grad_dk")
        feeds = {x: f32(60, 2, 5, 6, 3), k: f32(61, 3, 2, 3, 4), dk: f32(62, 3, 3, 3, 2)}
        return feeds, n

    keys = [
        "conv_same", "conv_valid", "conv_dil", "dw", "maxpool", "maxpool_same", "avgpool", "avgpool_valid",
        "grad_x", "grad_k", "grad_dk",
    ]
    plain_case("conv", build, [([], keys)])


# ---------------------------------------------------------------- dtypes


def dtypes():
    def build():
        x = tf1.placeholder(tf.float32, [2, 3], name="x")
        w16 = tf.constant(f32(70, 3, 2), dtype=tf.bfloat16, name="w_bf16")
        h16 = tf.constant(f32(71, 2, 3), dtype=tf.float16, name="h_f16")
        i8 = tf.constant([-128, -3, 0, 5, 127, 9], dtype=tf.int8, name="i8")
        u8 = tf.constant([0, 3, 200, 255, 7, 9], dtype=tf.uint8, name="u8")
        n = {}
        xb = tf.cast(x, tf.bfloat16)
        n["bf16_matmul"] = tf.matmul(xb, w16, name="bf16_matmul")
        n["bf16_relu"] = tf.nn.relu(xb * tf.constant(3.0, tf.bfloat16), name="bf16_relu")
        n["bf16_to_f32"] = tf.cast(n["bf16_matmul"], tf.float32, name="bf16_to_f32")
        xh = tf.cast(x, tf.float16)
        n["f16_add"] = tf.add(xh, h16, name="f16_add")
        n["f16_softmax"] = tf.nn.softmax(xh * h16, name="f16_softmax")
        n["f16_sum"] = tf.reduce_sum(xh, axis=1, name="f16_sum")
        n["i8_add"] = tf.add(i8, tf.constant(3, tf.int8), name="i8_add")
        n["u8_mul"] = tf.multiply(u8, tf.constant(2, tf.uint8), name="u8_mul")
        n["i8_to_f32"] = tf.cast(i8, tf.float32, name="i8_to_f32")
        n["f32_to_u8"] = tf.cast(tf.abs(x) * 50.0, tf.uint8, name="f32_to_u8")
        n["i64"] = tf.cast(u8, tf.int64, name="i64") * tf.constant(1 << 40, tf.int64)
        n["bool_cast"] = tf.cast(i8, tf.bool, name="bool_cast")
        n["f32_to_f16"] = tf.cast(x * 1000.0, tf.float16, name="f32_to_f16")
        # Mixed precision loss scaling, as a LossScaleOptimizer writes it: scale, grads, unscale, check finite.
        scale = tf.constant(1024.0, name="loss_scale")
        logits = tf.cast(tf.matmul(xb, w16), tf.float32)
        loss = tf.reduce_mean(tf.square(logits))
        (g,) = tf.gradients(loss * scale, [w16])
        g = tf.cast(g, tf.float32) / scale
        n["mp_grad"] = tf.identity(g, name="mp_grad")
        n["mp_finite"] = tf.reduce_all(tf.math.is_finite(g), name="mp_finite")
        feeds = {x: f32(72, 2, 3)}
        return feeds, n

    keys = [
        "bf16_matmul", "bf16_relu", "bf16_to_f32", "f16_add", "f16_softmax", "f16_sum", "i8_add", "u8_mul",
        "i8_to_f32", "f32_to_u8", "i64", "bool_cast", "f32_to_f16", "mp_grad", "mp_finite",
    ]
    # Values computed in bf16 carry its precision (8 significant bits) even after a cast to f32.
    plain_case("dtypes", build, [([], keys)], rtol=2.0**-8)


# ---------------------------------------------------------------- replicated training step


def replicated_case(name, step, per_replica_inputs, rtol=1e-4):
    """Writes a tpu.replicate graph of `step` over len(per_replica_inputs) replicas, its tags, and
    TF's outputs of `step` run once per replica in a plain graph (output_{i}_shard_{r}:0)."""
    num_replicas = len(per_replica_inputs)
    g = tf.Graph()
    with g.as_default():
        inputs = []
        for r, values in enumerate(per_replica_inputs):
            inputs.append(
                [
                    tf1.placeholder(tf.as_dtype(v.dtype), v.shape, name=f"in{k}_{r}")
                    for k, v in enumerate(values)
                ]
            )
        tpu.replicate(step, inputs)
    feeds = {}
    for r, values in enumerate(per_replica_inputs):
        for k, v in enumerate(values):
            feeds[f"in{k}_{r}:0"] = enc(v)
    fetches = {}
    for r, values in enumerate(per_replica_inputs):
        pg = tf.Graph()
        with pg.as_default():
            outs = step(*[tf.constant(v) for v in values])
            with tf1.Session(graph=pg) as sess:
                got = sess.run(outs)
        for i, v in enumerate(got):
            fetches[f"output_{i}_shard_{r}:0"] = enc(v)
    tags = {}
    for node in g.as_graph_def().node:
        entry = {"op": node.op}
        if "_tpu_replicate" in node.attr:
            entry["R"] = node.attr["_tpu_replicate"].s.decode()
        if "_xla_outside_compilation" in node.attr:
            entry["OC"] = node.attr["_xla_outside_compilation"].s.decode()
        tags[node.name] = entry
    meta = {
        "kind": "replicated",
        "num_replicas": num_replicas,
        "feeds": feeds,
        "runs": [{"targets": [], "fetches": fetches}],
        "rtol": rtol,
    }
    write(name, g, meta, tags)


def replicated_step():
    """A Keras-style dense + layer-norm + gelu + sparse-xent step, 2 replicas."""

    def step(x, labels, w, b, gamma):
        h = tf.nn.bias_add(tf.matmul(x, w), b)
        mu = tf.reduce_mean(h, axis=-1, keepdims=True)
        var = tf.reduce_mean(tf.math.squared_difference(h, mu), axis=-1, keepdims=True)
        h = (h - mu) * tf.math.rsqrt(var + 1e-3) * gamma
        h = tf.nn.gelu(h)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=h))
        gw, gb, gg = tf.gradients(loss, [w, b, gamma])
        pred = tf.argmax(h, axis=1, output_type=tf.int32)
        acc = tf.reduce_mean(tf.cast(tf.equal(pred, labels), tf.float32))
        return [loss, w - 0.1 * gw, b - 0.1 * gb, gamma - 0.1 * gg, acc]

    w0, b0, g0 = f32(90, 3, 4), f32(91, 4), f32(92, 4) + 1.0
    labels = [np.array([0, 2, 1, 3], np.int32), np.array([3, 3, 0, 1], np.int32)]
    replicated_case(
        "replicated_step", step, [[f32(80 + r, 4, 3), labels[r], w0, b0, g0] for r in range(2)]
    )


def replicated_cnn():
    """A conv + batch-norm + pooling + embedding step with a momentum-style update, 2 replicas."""

    def step(x, ids, table, k, scale, offset):
        emb = tf.gather(table, ids)  # [2, 3]
        h = tf.nn.conv2d(x, k, strides=1, padding="SAME")
        h, _, _ = tf1.nn.fused_batch_norm(h, scale, offset, epsilon=1e-3, is_training=True)[:3]
        h = tf.nn.relu6(h)
        h = tf.nn.max_pool2d(h, 2, 2, "VALID")
        h = tf.reduce_mean(h, axis=[1, 2])  # [2, 3]
        logits = h + emb
        loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=tf.nn.softmax(emb), logits=logits))
        gk, gs, go, gt = tf.gradients(loss, [k, scale, offset, table])
        gt = tf.convert_to_tensor(gt)
        return [loss, k - 0.5 * gk, scale - 0.5 * gs, offset - 0.5 * go, table - 0.5 * gt]

    k0, s0, o0, t0 = f32(101, 3, 3, 2, 3), f32(102, 3) + 1.0, f32(103, 3), f32(104, 5, 3)
    ids = [np.array([1, 4], np.int32), np.array([0, 0], np.int32)]
    replicated_case(
        "replicated_cnn", step, [[f32(110 + r, 2, 4, 4, 2), ids[r], t0, k0, s0, o0] for r in range(2)]
    )


def replicated_mixed_precision():
    """A bf16 dense layer with f32 master weights and loss scaling, 2 replicas."""

    def step(x, w):
        xb, wb = tf.cast(x, tf.bfloat16), tf.cast(w, tf.bfloat16)
        h = tf.nn.relu(tf.matmul(xb, wb))
        loss = tf.reduce_mean(tf.square(tf.cast(h, tf.float32)))
        scale = tf.constant(256.0)
        (g,) = tf.gradients(loss * scale, [w])
        g = g / scale
        finite = tf.reduce_all(tf.math.is_finite(g))
        return [loss, w - 0.1 * g, finite]

    w0 = f32(120, 3, 4)
    replicated_case(
        "replicated_mixed_precision",
        step,
        [[f32(121 + r, 2, 3), w0] for r in range(2)],
        rtol=2.0**-8,
    )


def replicated_optimizer():
    """Mirrored resource variables updated inside tpu.replicate by the optimizer ops, 2 replicas.

    Each replica updates its own copy (no cross-replica sum), so TF's numbers are the step run
    once per replica from the initial values; "variables_after" holds every copy after one step."""
    num_replicas = 2
    init = {"w": f32(130, 3, 2), "mom": np.zeros((3, 2), np.float32), "a": f32(135, 3, 2),
            "m": np.zeros((3, 2), np.float32), "v": np.zeros((3, 2), np.float32)}
    xs = [f32(131 + r, 4, 3) for r in range(num_replicas)]

    def build_vars():
        return {n: tf1.Variable(v, name=n, use_resource=True) for n, v in init.items()}

    def step(x, var):
        loss = tf.reduce_sum(tf.square(tf.matmul(x, var["w"])))
        (gw,) = tf.gradients(loss, [var["w"]])
        ups = [
            tf.raw_ops.ResourceApplyKerasMomentum(
                var=var["w"].handle, accum=var["mom"].handle, lr=tf.constant(0.01), grad=gw,
                momentum=tf.constant(0.9), use_nesterov=True,
            ),
            tf.raw_ops.ResourceApplyAdam(
                var=var["a"].handle, m=var["m"].handle, v=var["v"].handle, beta1_power=tf.constant(0.9),
                beta2_power=tf.constant(0.999), lr=tf.constant(0.01), beta1=tf.constant(0.9),
                beta2=tf.constant(0.999), epsilon=tf.constant(1e-7), grad=gw,
            ),
        ]
        with tf.control_dependencies(ups):
            return [tf.identity(loss)]

    g = tf.Graph()
    with g.as_default():
        var = build_vars()
        ph = [tf1.placeholder(tf.float32, [4, 3], name=f"in0_{r}") for r in range(num_replicas)]
        tpu.replicate(lambda x: step(x, var), [[p] for p in ph])
    fetches, after = {}, {n: [] for n in init}
    for r in range(num_replicas):
        pg = tf.Graph()
        with pg.as_default():
            var = build_vars()
            outs = step(tf.constant(xs[r]), var)
            with tf1.Session(graph=pg) as sess:
                sess.run(tf1.global_variables_initializer())
                got = sess.run(outs)
                values = sess.run({n: v.read_value() for n, v in var.items()})
        for i, v in enumerate(got):
            fetches[f"output_{i}_shard_{r}:0"] = enc(v)
        for n in init:
            after[n].append(enc(values[n]))
    tags = {}
    for node in g.as_graph_def().node:
        entry = {"op": node.op}
        if "_tpu_replicate" in node.attr:
            entry["R"] = node.attr["_tpu_replicate"].s.decode()
        if "_xla_outside_compilation" in node.attr:
            entry["OC"] = node.attr["_xla_outside_compilation"].s.decode()
        tags[node.name] = entry
    meta = {
        "kind": "replicated",
        "num_replicas": num_replicas,
        "feeds": {f"in0_{r}:0": enc(xs[r]) for r in range(num_replicas)},
        "runs": [{"targets": [], "fetches": fetches}],
        "variables_after": after,
        "rtol": 1e-4,
    }
    write("replicated_optimizer", g, meta, tags)


CASES = {
    "optimizers": optimizers,
    "math": math_ops,
    "losses": losses,
    "shape": shape_ops,
    "embeddings": embeddings,
    "batchnorm": batchnorm,
    "conv": conv,
    "dtypes": dtypes,
    "replicated_step": replicated_step,
    "replicated_cnn": replicated_cnn,
    "replicated_mixed_precision": replicated_mixed_precision,
    "replicated_optimizer": replicated_optimizer,
}

if __name__ == "__main__":
    wanted = sys.argv[1:] or list(CASES)
    for case in wanted:
        CASES[case]()
