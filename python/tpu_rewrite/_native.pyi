"""Type stubs of the extension module (crates/py); use the functions of tpu_rewrite."""

from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import numpy.typing as npt

__version__: str

class Module:
    """A graph module, loaded or rewritten; immutable."""

    @property
    def rewritten(self) -> bool: ...
    @property
    def name(self) -> str: ...
    @property
    def graphs(self) -> List[str]: ...
    @property
    def clusters(self) -> List[Dict[str, Any]]:
        """The replicate clusters of the first graph (after rewrite): name,
        num_replicas, num_cores_per_replica, members, inputs, outputs."""
    @property
    def diagnostics(self) -> List[Dict[str, Any]]:
        """Warnings of loading and rewriting (dicts as in Error.diagnostics)."""
    def to_opg(self) -> str: ...
    def to_dot(self) -> str: ...
    def to_json(self) -> str: ...
    def to_graph_def(self) -> bytes:
        """A binary GraphDef that tf.compat.v1.GraphDef.FromString reads."""
    def to_pbtxt(self) -> str: ...

class Lowered:
    """Per-device programs, with the rewritten module and the device assignment."""

    @property
    def num_replicas(self) -> int: ...
    @property
    def cores_per_replica(self) -> int: ...
    @property
    def steps_per_run(self) -> int: ...
    @property
    def plain(self) -> Optional[str]:
        """For a plain graph, what its single-replica cluster is; None otherwise."""
    @property
    def device_assignment(self) -> npt.NDArray[np.int64]:
        """[replica, logical core] -> device id (task * cores_per_host + core)."""
    def to_opg(self) -> str: ...
    def stablehlo(self, host_transfer: Optional[str] = None) -> str:
        """The device programs as StableHLO text, modules separated by '// -----'."""
    def programs(self, host_transfer: Optional[str] = None) -> List[Dict[str, Any]]:
        """Each StableHLO module with its arguments, their values, outputs,
        variables, num_replicas, num_partitions and device_ids."""

def load_bytes(data: bytes, name: str, format: Optional[str] = None) -> Module: ...
def load_path(path: str, format: Optional[str] = None, function: Optional[str] = None) -> Module: ...
def rewrite(
    module: Module,
    passes: Optional[List[str]] = None,
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
def run_lowered(
    lowered: Lowered,
    feeds: Dict[str, Any],
    fetches: Optional[List[str]] = None,
    steps: int = 1,
    backend: str = "sim",
    timeout: float = 30.0,
    deadline: Optional[float] = None,
    pjrt_plugin: Optional[str] = None,
    host_transfer: Optional[str] = None,
    use_compile_cache: bool = True,
    compile_cache: Optional[str] = None,
    compile_cache_size: int = 1 << 30,
    device_checks: bool = True,
) -> Tuple[List[Tuple[Any, ...]], Dict[str, np.ndarray]]: ...
