"""vcpulab: a deterministic vCPU-scheduling simulator.

>>> import vcpulab
>>> res = vcpulab.run("scenario.toml")          # or a dict of the same schema
>>> res.vms()                                    # pandas DataFrame, one row per VM
>>> rows = vcpulab.reproduce(["hyperv-root"])    # built-in reproductions
>>> reports = vcpulab.robustness(["hyperv-root"])  # its claims under perturbed setups
>>> tr = vcpulab.trace("scenario.toml", window=("1s", "1.1s"))  # Perfetto trace

This module imports neither pandas nor tqdm; they are loaded when first needed.
"""

from ._native import NotFoundError, ScenarioError, SimulationError
from ._native import version as _native_version
from .api import (
    Result,
    experiment_scenario,
    experiments,
    reproduce,
    reproduce_claims,
    reproduce_frame,
    run,
    schedulers,
    validate,
    workload_kinds,
)
from .robustness import robustness
from .tracing import Trace, trace

__version__: str = _native_version()

__all__ = [
    "NotFoundError",
    "Result",
    "ScenarioError",
    "SimulationError",
    "__version__",
    "experiment_scenario",
    "experiments",
    "reproduce",
    "reproduce_claims",
    "reproduce_frame",
    "robustness",
    "run",
    "schedulers",
    "trace",
    "Trace",
    "validate",
    "workload_kinds",
]
