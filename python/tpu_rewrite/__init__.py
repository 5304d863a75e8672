"""tpu_rewrite: TPU replication rewrites of TensorFlow graphs, from Python.

The package is the tpu-rewrite Rust library built as an extension module;
every function calls it (there is no second implementation).

    load(x)                   a GraphDef object, .pb bytes, .pbtxt/.opg text, or a path -> Module
    rewrite(module, ...)      run the rewrite passes -> Module (clusters, diagnostics, to_graph_def, ...)
    lower(module, ...)        per-device programs -> Lowered (stablehlo(), device_assignment)
    run(module, ...)          run on the simulator ("sim") or XLA through PJRT ("pjrt") -> RunResult

Errors in the input raise ``tpu_rewrite.Error`` (a ``ValueError``) with
``.code``, ``.diagnostics`` and, as ``str(e)``, the report the CLI prints.
"""

from __future__ import annotations

import os
from typing import Any, Iterable, Mapping, Optional, Sequence, Union

import ml_dtypes  # noqa: F401  (registers bfloat16 with NumPy before any array crosses)
import numpy as np

from ._error import Error
from ._native import Lowered, Module, __version__
from . import _native

__all__ = ["Error", "Lowered", "Module", "RunResult", "load", "lower", "rewrite", "run", "__version__"]

_FORMATS = (None, "opg", "pbtxt", "pb")


def _looks_like_text(x: str) -> bool:
    """Whether a string is graph text rather than a path."""
    return "\n" in x or "{" in x


def load(
    x: Any, format: Optional[str] = None, name: Optional[str] = None, function: Optional[str] = None
) -> Module:
    """Reads a graph.

    ``x`` is a ``tf.compat.v1.GraphDef`` (or anything with
    ``SerializeToString()``), the bytes of a ``.pb`` (or of text), the text
    of a ``.pbtxt`` or ``.opg``, or a path (``str`` or ``os.PathLike``).
    A ``str`` holding a newline or ``{`` is graph text; any other is a
    path. ``format`` ("opg", "pbtxt" or "pb") overrides the choice made from the
    extension or the bytes; ``name`` is the file name diagnostics show.
    A path to a SavedModel (its directory, or its ``saved_model.pb``) loads
    the function ``function`` (default: the serving signature) with its
    variables' checkpoint values, as ``tpu-rewrite run DIR --function``
    does; ``function`` on any other input is an error.
    A GraphDef is imported and verified; errors raise ``Error``.
    """
    if format not in _FORMATS:
        raise ValueError(f'format must be "opg", "pbtxt", "pb" or None, not {format!r}')
    if function is not None and not isinstance(x, (str, os.PathLike)):
        raise ValueError("function picks a function of a SavedModel, which is loaded from a path")
    if hasattr(x, "SerializeToString") and not isinstance(x, (bytes, str)):
        return _native.load_bytes(x.SerializeToString(), name or "<GraphDef>", format or "pb")
    if isinstance(x, (bytes, bytearray, memoryview)):
        return _native.load_bytes(bytes(x), name or "<bytes>", format)
    if isinstance(x, str) and _looks_like_text(x):
        return _native.load_bytes(x.encode(), name or "<string>", format)
    if isinstance(x, (str, os.PathLike)):
        return _native.load_path(os.fspath(x), format, function)
    raise TypeError(
        "load takes a GraphDef, bytes, graph text or a path, not " + type(x).__name__
    )


def rewrite(
    graph: Module,
    passes: Optional[Union[str, Sequence[str]]] = None,
    gradient_cluster_policy: str = "nested",
    functionalize: bool = False,
    all_reduce_fusion: bool = False,
    verify_each_pass: bool = False,
) -> Module:
    """Runs the rewrite passes (all of them, or ``passes`` in pipeline order)
    on a copy of ``graph`` and returns the rewritten module.

    ``gradient_cluster_policy``: "nested" (C.uid.uid2) or "flat" (TF 2.x).
    ``functionalize``: rewrite TF1 control flow into While/If afterwards.
    ``all_reduce_fusion``: fuse independent CrossReplicaSums.
    """
    if isinstance(passes, str):
        passes = [p.strip() for p in passes.split(",") if p.strip()]
    return _native.rewrite(
        graph,
        list(passes) if passes is not None else None,
        gradient_cluster_policy,
        functionalize,
        all_reduce_fusion,
        verify_each_pass,
    )


def lower(
    module: Module,
    topology: str = "1x8",
    num_replicas: Optional[int] = None,
    cores_per_replica: Optional[int] = None,
    device_assignment: Optional[str] = None,
    steps_per_run: int = 1,
    skip_initializers: bool = False,
) -> Lowered:
    """Lowers a module to one program per device on ``topology``
    (HOSTSxCORES_PER_HOST). A module ``rewrite`` did not make is rewritten
    with the default passes first. ``device_assignment`` is a table
    ``task:core`` per logical core, ``,`` between cores, ``;`` between
    replicas. A plain graph (no replicate cluster: a GraphDef, a
    SavedModel function) becomes one single-replica cluster carrying the
    graph's results, its variable initialisers (or a SavedModel's
    checkpoint values) set first, as ``tpu-rewrite run`` makes it;
    ``skip_initializers=True`` leaves them out, as ``run --no-initializers``
    does, so the variables start from their feeds (or zeros).
    ``Lowered.plain`` says what was chosen."""
    return _native.lower(
        module, topology, num_replicas, cores_per_replica, device_assignment, steps_per_run, skip_initializers
    )


class RunResult(dict):
    """The values of a run: a dict from tensor name to ``numpy.ndarray``.

    Without ``fetches``, the keys are the computation outputs, each named by
    the tensor the replicated computation returns (``"loss:0"``). An output
    with a reduce op (SUM/MEAN) is one array; any other has the replicas
    along a new leading axis (``value[r]`` is replica ``r``'s), and
    ``per_replica[name]`` holds the same values as a list. With
    ``fetches``, each key is a fetch as given, its value as fetched.

    ``variables`` maps each mirrored variable to its value after the run
    (replica 0's copy; the replicas' copies are equal after a synchronous
    step). ``reduce_ops`` maps each output to "SUM", "MEAN" or None.
    """

    variables: dict
    per_replica: dict
    reduce_ops: dict

    def __init__(self) -> None:
        super().__init__()
        self.variables = {}
        self.per_replica = {}
        self.reduce_ops = {}


def run(
    module: Union[Module, Lowered],
    feeds: Optional[Mapping[str, Any]] = None,
    fetches: Optional[Iterable[str]] = None,
    steps: int = 1,
    backend: str = "sim",
    topology: str = "1x8",
    steps_per_run: int = 1,
    num_replicas: Optional[int] = None,
    cores_per_replica: Optional[int] = None,
    timeout: float = 30.0,
    deadline: Optional[float] = None,
    pjrt_plugin: Optional[Union[str, os.PathLike]] = None,
    host_transfer: Optional[str] = None,
    compile_cache: Union[str, os.PathLike, bool, None] = None,
    compile_cache_size: int = 1 << 30,
    device_checks: bool = True,
) -> RunResult:
    """Runs ``steps`` replicated steps and returns a ``RunResult``.

    ``module`` is a ``Module`` (lowered here on ``topology``) or a
    ``Lowered``. ``feeds`` maps tensor names (``"x0:0"``) to arrays (any
    value is given to ``numpy.asarray``; its dtype must be the
    placeholder's). ``backend``: "sim" (the simulator; Ctrl-C stops it
    between device iterations) or "pjrt" (XLA through the PJRT plugin of
    ``pjrt_plugin``, else ``$TPU_REWRITE_PJRT_PLUGIN``, else the cached CPU
    plugin). ``timeout``: the longest any device waits for another, in
    seconds; ``deadline``: the longest one step may run (simulator only).
    On PJRT, compiled executables are kept between runs in
    ``compile_cache`` (a directory; ``None``: the default one,
    ``~/.cache/tpu-rewrite/compile``; ``False``: compile every run), at most
    ``compile_cache_size`` bytes, as ``tpu-rewrite run --compile-cache``
    keeps them; ``device_checks=False`` drops the on-device index,
    capacity and optional checks, as ``--no-device-checks`` does.
    """
    if isinstance(module, Module):
        module = lower(
            module,
            topology=topology,
            num_replicas=num_replicas,
            cores_per_replica=cores_per_replica,
            steps_per_run=steps_per_run,
        )
    elif not isinstance(module, Lowered):
        raise TypeError("run takes a Module or a Lowered, not " + type(module).__name__)
    if backend not in ("sim", "pjrt"):
        raise ValueError(f'backend must be "sim" or "pjrt", not {backend!r}')
    if deadline is not None and backend != "sim":
        raise ValueError("deadline applies to the simulator (backend=\"sim\") only")
    if compile_cache is True:
        compile_cache = None
    if compile_cache is not None and compile_cache is not False and backend != "pjrt":
        raise ValueError("compile_cache applies to PJRT (backend=\"pjrt\") only")
    if compile_cache_size < 0:
        raise ValueError(f"compile_cache_size must be a number of bytes, not {compile_cache_size}")
    fetch_list = None if fetches is None else [str(f) for f in fetches]
    values, variables = _native.run_lowered(
        module,
        dict(feeds or {}),
        fetch_list,
        steps,
        backend,
        timeout,
        deadline,
        None if pjrt_plugin is None else os.fspath(pjrt_plugin),
        host_transfer,
        compile_cache is not False,
        None if compile_cache is None or compile_cache is False else os.fspath(compile_cache),
        compile_cache_size,
        device_checks,
    )
    result = RunResult()
    if fetch_list is not None:
        for name, value in values:
            result[name] = value
    else:
        for name, reduce_op, value in values:
            result.reduce_ops[name] = reduce_op
            if reduce_op is None:
                result.per_replica[name] = list(value)
                result[name] = np.stack(value) if value else np.zeros((0,))
            else:
                result[name] = value
    result.variables.update(variables)
    return result
