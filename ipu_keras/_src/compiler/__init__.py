"""IR -> IPU executable. Imports ir, ops and the simulator's target descriptions only."""
from ipu_keras._src.device.executable import Executable
from ipu_keras._src.compiler.pipeline import GRAPH_PASSES, compile_graph

__all__ = ["Executable", "GRAPH_PASSES", "compile_graph"]
