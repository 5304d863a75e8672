"""Type stubs of the tpu_rewrite package."""

import os
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Union

import numpy as np

from ._error import Error as Error
from ._native import Lowered as Lowered, Module as Module

__version__: str

def load(
    x: Any, format: Optional[str] = None, name: Optional[str] = None, function: Optional[str] = None
) -> Module: ...
def rewrite(
    graph: Module,
    passes: Optional[Union[str, Sequence[str]]] = None,
    gradient_cluster_policy: str = "nested",
    functionalize: bool = False,
    all_reduce_fusion: bool = False,
    verify_each_pass: bool = False,
) -> Module: ...
def lower(
    module: Module,
    topology: str = "1x8",
    num_replicas: Optional[int] = None,
    cores_per_replica: Optional[int] = None,
    device_assignment: Optional[str] = None,
    steps_per_run: int = 1,
    skip_initializers: bool = False,
) -> Lowered: ...

class RunResult(Dict[str, np.ndarray]):
    variables: Dict[str, np.ndarray]
    per_replica: Dict[str, List[np.ndarray]]
    reduce_ops: Dict[str, Optional[str]]

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
) -> RunResult: ...
