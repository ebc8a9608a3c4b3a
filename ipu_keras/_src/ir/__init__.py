"""The IPU IR: typed SSA graphs, their printer and verifier."""
from ipu_keras._src.ir.graph import Equation, FeedSpec, Graph, Source, Value, VariableSpec
from ipu_keras._src.ir.printer import format_graph
from ipu_keras._src.ir.types import TensorType, type_of
from ipu_keras._src.ir.verify import verify

__all__ = [
    "Equation", "FeedSpec", "Graph", "Source", "TensorType", "Value", "VariableSpec",
    "format_graph", "type_of", "verify",
]
