"""TensorFlow -> IR: the front of the compiler, the one below the glue that reads TensorFlow
graphs (the runtime's feeds and variable sync import TensorFlow too, to move data)."""
from ipu_keras._src.tracer.node import set_outfeed_marker
from ipu_keras._src.tracer.state import StateRef
from ipu_keras._src.tracer.trace import Traced, import_concrete, make_tf_function, trace

__all__ = [
    "StateRef", "Traced", "import_concrete", "make_tf_function", "set_outfeed_marker", "trace",
]
