"""The IR: a flat SSA list of equations over typed values.

A `Graph` has input values, output values and an ordered list of `Equation`s.
Each equation applies one registered op (see `ipu_keras._src.ops`) to input values,
with static `params`, and defines fresh output values. Control-flow ops keep
their bodies as sub-graphs inside `params` (`while`: `cond` and `body`; `if`:
`then` and `else`; `call`: `fn`). Program order is the order of the list:
side effects (variable writes, feeds) happen in that order.

Placement: an equation's `shard` is the IPU (within one replica) it runs on and its
`stage` the pipeline stage it belongs to; None means "not placed by the user" (the
compiler's `shard` pass fills shards in; stages stay None outside pipelines). The
micro-batch loop of a pipeline carries `pipeline = {"schedule": name, "depth": n}`,
which the compiler's `pipeline` analysis turns into a schedule and its time.

Variables and feeds are device state shared by every sub-graph; equations name
them by index into the top-level graph's `variables`, `infeeds` and `outfeeds`.
"""
import dataclasses
import itertools

from ipu_keras._src.ir.printer import format_graph

_ids = itertools.count()


@dataclasses.dataclass(frozen=True)
class Source:
    """Where an equation came from: the TensorFlow node and, if known, the Keras layer."""

    node: str = ""
    layer: str = ""

    def __str__(self):
        return f"{self.node}" + (f" (layer '{self.layer}')" if self.layer else "")


class Value:
    """An SSA value: defined once, by a graph input or an equation output."""

    __slots__ = ("id", "type", "name")

    def __init__(self, type, name=""):
        self.id = next(_ids)
        self.type = type
        self.name = name

    @property
    def shape(self):
        return self.type.shape

    @property
    def dtype(self):
        return self.type.dtype

    def __repr__(self):
        return f"%{self.id}:{self.type}"


@dataclasses.dataclass(eq=False)
class Equation:
    op: str
    inputs: list
    outputs: list
    params: dict = dataclasses.field(default_factory=dict)
    source: Source = dataclasses.field(default_factory=Source)
    shard: object = None    # int IPU index within a replica, or None (unplaced)
    stage: object = None    # int pipeline stage, or None
    pipeline: object = None  # of the micro-batch `while` of a pipeline: {schedule, depth}

    def subgraphs(self):
        """The sub-graphs this equation holds (control-flow bodies), in a stable order (by
        param name). Every pass walks every equation, most of which hold none: one scan
        of the values settles those."""
        subs = [v for v in self.params.values() if isinstance(v, Graph)]
        if len(subs) > 1:
            subs = [v for _, v in sorted((k, v) for k, v in self.params.items()
                                         if isinstance(v, Graph))]
        return subs


@dataclasses.dataclass(frozen=True)
class VariableSpec:
    """A device-resident variable: always-live, read and written by equations."""

    name: str
    type: object


@dataclasses.dataclass(frozen=True)
class FeedSpec:
    """A host<->device stream: the flat types of one element (one dequeue or enqueue)."""

    name: str
    types: tuple


@dataclasses.dataclass(eq=False)
class Graph:
    inputs: list
    outputs: list
    equations: list
    variables: list = dataclasses.field(default_factory=list)
    infeeds: list = dataclasses.field(default_factory=list)
    outfeeds: list = dataclasses.field(default_factory=list)

    def replace(self, **changes):
        return dataclasses.replace(self, **changes)

    def walk(self):
        """Yield every equation, depth first, including those in sub-graphs."""
        for eqn in self.equations:
            yield eqn
            for sub in eqn.subgraphs():
                yield from sub.walk()

    def __str__(self):
        return format_graph(self)
