"""The simulated IPU: targets, the cost model and the engine. numpy only, never TensorFlow."""
from ipu_keras._src.simulator.engine import Engine
from ipu_keras._src.simulator.strict import StrictEngine
from ipu_keras._src.device.targets import VERSIONS, Target, get_target

__all__ = ["Engine", "StrictEngine", "Target", "VERSIONS", "get_target"]
