"""The cost model: a fast simulator, the reference simulator it must agree with, and bounds."""

from placement_gym.cost_model.bounds import SingleDevice, lower_bound, single_device
from placement_gym.cost_model.fast import simulate, simulate_batch
from placement_gym.cost_model.proven_bounds import Bound, proven_bound
from placement_gym.cost_model.reference import reference_simulate
from placement_gym.cost_model.result import Schedule, SimulationResult

__all__ = [
    "Bound", "Schedule", "SimulationResult", "SingleDevice", "lower_bound", "proven_bound",
    "reference_simulate", "simulate", "simulate_batch", "single_device",
]
