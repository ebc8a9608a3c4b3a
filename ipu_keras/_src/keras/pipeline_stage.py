"""`PipelineStage(k)` and the stage assignment records of Keras pipelining.

`PipelineStage` is the scope of Graphcore's Keras: layers constructed inside it are on
stage k for all their calls, and layer calls made inside it (building a functional
model, or in a subclassed model's `call`) are on stage k, which takes precedence. The
scope records, it does not place: the first `PipelineStage` installs two small hooks on
Keras (`Layer.__init__` and `Node.__init__`, the symbolic call of a layer) that note the
current stage on the layer or node made inside the scope; `keras/pipelining.py` reads
the notes and places each layer's ops when a pipelined model is traced. While a
pipelined model is traced, the scope also opens the placement scopes itself, which is
how the stages written in a subclassed model's `call` reach the ops.

The records (`SequentialLayerPipelineStageAssignment`,
`FunctionalLayerPipelineStageAssignment`, `ModelLayerPipelineStageAssignment`) are what
`get_pipeline_stage_assignment` returns and `set_pipeline_stage_assignment` takes.
"""
import contextlib

from keras.src.layers.layer import Layer
from keras.src.ops.node import Node

STAGE_ATTR = "_ipu_pipeline_stage"
_current = [None]
_placement = [None]  # while a pipelined model is traced: stage -> context manager factory
_hooked = [False]


class PipelineStage:
    """A scope assigning the Keras layers constructed or called inside to a pipeline stage.

    Args:
        stage: The pipeline stage (a non-negative int).

    Raises:
        ValueError: `stage` is not a non-negative int.
        RuntimeError: the scope is nested in another `PipelineStage`.
    """

    def __init__(self, stage):
        self._stage = stage
        self._placing = None

    def __enter__(self):
        stage = self._stage
        if isinstance(stage, bool) or not isinstance(stage, int) or stage < 0:
            raise ValueError(f"{stage} is not a valid pipeline stage: expected a non-negative "
                             f"int. Received: stage={stage!r}.")
        if _current[0] is not None:
            raise RuntimeError(
                f"Pipeline stages must not be nested: expected no enclosing PipelineStage. "
                f"Received: PipelineStage({stage}) inside PipelineStage({_current[0]}).")
        _install_hooks()
        _current[0] = stage
        if _placement[0] is not None:
            self._placing = contextlib.ExitStack()
            self._placing.enter_context(_placement[0](stage))
        return self

    def __exit__(self, *exc_info):
        _current[0] = None
        if self._placing is not None:
            self._placing.close()
            self._placing = None


def current_stage():
    """The stage of the open `PipelineStage` scope, or None."""
    return _current[0]


@contextlib.contextmanager
def placing(place):
    """While open, `PipelineStage(k)` also enters `place(k)` (a context manager)."""
    previous, _placement[0] = _placement[0], place
    try:
        yield
    finally:
        _placement[0] = previous


def _install_hooks():
    if _hooked[0]:
        return
    _hooked[0] = True
    layer_init, node_init = Layer.__init__, Node.__init__

    def init_layer(self, *args, **kwargs):
        layer_init(self, *args, **kwargs)
        if _current[0] is not None:
            object.__setattr__(self, STAGE_ATTR, _current[0])

    def init_node(self, *args, **kwargs):
        node_init(self, *args, **kwargs)
        if _current[0] is not None:
            object.__setattr__(self, STAGE_ATTR, _current[0])

    Layer.__init__, Node.__init__ = init_layer, init_node


class SequentialLayerPipelineStageAssignment:
    """The pipeline stage of a layer of a `Sequential` model.

    Args:
        layer: The Keras layer.
        pipeline_stage: Its stage, or None (unassigned).
    """

    is_nested_model = False

    def __init__(self, layer, pipeline_stage=None):
        self._layer = layer
        self.pipeline_stage = pipeline_stage

    @property
    def layer(self):
        """The Keras layer this assignment is for."""
        return self._layer

    def __str__(self):
        return f"Layer: {self.layer.name} is assigned to pipeline stage: {self.pipeline_stage}"


class ModelLayerPipelineStageAssignment(SequentialLayerPipelineStageAssignment):
    """The pipeline stage of one call (`node_index`) of a layer of a model.

    Args:
        layer: The Keras layer.
        node_index: Which call of the layer (0 is the first).
        pipeline_stage: Its stage, or None (unassigned).
    """

    def __init__(self, layer, node_index, pipeline_stage=None):
        super().__init__(layer, pipeline_stage)
        self._node_index = node_index

    @property
    def node_index(self):
        """The call of the layer this assignment is for."""
        return self._node_index

    @property
    def inbound_layers(self):
        """The layers whose outputs this call consumes (to tell calls apart)."""
        nodes = getattr(self.layer, "_inbound_nodes", [])
        if self.node_index >= len(nodes):
            return []
        return [parent.operation for parent in nodes[self.node_index].parent_nodes]

    def __str__(self):
        return (f"Layer: {self.layer.name} (node index {self.node_index}) is assigned to "
                f"pipeline stage: {self.pipeline_stage}")


class FunctionalLayerPipelineStageAssignment(ModelLayerPipelineStageAssignment):
    """The pipeline stage of one call (`node_index`) of a layer of a functional model."""
