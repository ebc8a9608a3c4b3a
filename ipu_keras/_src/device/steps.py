"""The typed records of an executable's programs: steps, blocks and the facts they carry.

A program is blocks of steps. Each step kind is a frozen record with named fields:

  Exec(op, ins, outs, params)          runs the op's kernel: outs = op(*ins, **params)
  Read(var, out)                       Write(var, mode, src)
  Infeed(feed, outs)                   Outfeed(feed, ins)
  Collective(op, ins, outs, params)    across replicas, by the runtime
  While(carry, cond_block, cond_in, cond_out, body_block, body_in, body_out, outs)
  If(pred, ins, then_block, then_in, then_out, else_block, else_in, else_out, outs)
  Call(ins, body_block, body_in, body_out, outs, name)   an outlined function's body

Slot fields hold a slot (an int) or a tuple of them; `*_block` fields the index of a
sub-block, always larger than that of the block holding the step, except a `Call`'s
`body_block`: one body serves every call of the function, wherever they are, so it may
be any block but the main one and the caller's own (`checks.py` refuses a program whose
calls form a cycle). Every step also says
what it `reads` and `writes` in its block and which `blocks` it runs, so that no reader
needs a table of field positions. A `Block` holds its steps, its `cycles` per kind
(`CYCLE_KINDS`), its `profile` (`ProfileRow`s for reports), the `sources` of its steps
(`Source`, for errors raised while they run), the strict tile mode's `TileFacts` and,
for a pipeline's body, its `pipeline` schedule.

In `executable.json` a block is an object with those six names; a step is a list, its kind
then its fields in order (`["exec", op, ins, outs, params]`); a profile row is `[op,
layer, cycles in CYCLE_KINDS order, sub-blocks, IPU]`, a source `[node, layer]`, a tile
mapping `[slot or variable, start, tiles, per_tile]`, a view `[slot, [[source slot, size,
first, pitch, length, count, at, step], ...]]` and a step's traffic `[received,
source, k_split, partial_bytes, block_rows, block_cols]`. `blocks_from_data` rebuilds the
records and distrusts the structure: a field of the wrong type, a slot, variable, feed or
block out of range, a list of the wrong length raises `Malformed`, which the loader
reports as an `ExecutableFormatError`.
"""
import dataclasses
import numbers
from typing import ClassVar

CYCLE_KINDS = ("compute", "exchange", "sync", "host_io")

_record = dataclasses.dataclass(frozen=True, slots=True)


class Malformed(Exception):
    """A part of a saved program that is not what the format says: (expected, received)."""


class Step:
    """A step of a block. Subclasses are frozen records; `layout` names the kind of each
    field, for saving and for checking a loaded file."""

    __slots__ = ()
    kind: ClassVar[str] = ""
    layout: ClassVar[tuple] = ()
    reads = writes = blocks = ()
    """The slots the step reads and writes in its block, and the blocks it runs."""

    def to_data(self, encode):
        """The step as `executable.json` holds it: its kind, then its fields in order
        (`encode` turns params into JSON data)."""
        values = (getattr(self, name) for name in self.__match_args__)
        return [self.kind] + [_TO_DATA[k](v, encode) for k, v in zip(self.layout, values)]


class KernelStep(Step):
    """A step that reads its `ins` and writes its `outs` (kernels, collectives, and the
    engine's own pairs and siblings)."""

    __slots__ = ()
    reads = property(lambda self: self.ins)
    writes = property(lambda self: self.outs)


@_record
class _OpStep(KernelStep):
    """An op's step: `op` with its operands `ins`, results `outs` and `params`."""

    layout: ClassVar[tuple] = ("name", "slots", "slots", "params")
    op: str
    ins: tuple
    outs: tuple
    params: dict


@_record
class Exec(_OpStep):
    kind: ClassVar[str] = "exec"


@_record
class Read(Step):
    kind: ClassVar[str] = "read"
    layout: ClassVar[tuple] = ("var", "slot")
    var: int
    out: int

    writes = property(lambda self: (self.out,))


@_record
class Write(Step):
    kind: ClassVar[str] = "write"
    layout: ClassVar[tuple] = ("var", "name", "slot")
    var: int
    mode: str
    src: int

    reads = property(lambda self: (self.src,))


@_record
class Infeed(Step):
    kind: ClassVar[str] = "infeed"
    layout: ClassVar[tuple] = ("infeed", "slots")
    feed: int
    outs: tuple

    writes = property(lambda self: self.outs)


@_record
class Outfeed(Step):
    kind: ClassVar[str] = "outfeed"
    layout: ClassVar[tuple] = ("outfeed", "slots")
    feed: int
    ins: tuple

    reads = property(lambda self: self.ins)


@_record
class Collective(_OpStep):
    kind: ClassVar[str] = "collective"


@_record
class While(Step):
    """Runs `cond_block` on the carried values (`carry` first, then the body's results in
    `body_out`) and, while its `cond_out` holds, `body_block`; `outs` gets the last ones."""

    kind: ClassVar[str] = "while"
    layout: ClassVar[tuple] = ("slots", "block", "slots", "slot", "block", "slots", "slots",
                               "slots")
    carry: tuple
    cond_block: int
    cond_in: tuple
    cond_out: int
    body_block: int
    body_in: tuple
    body_out: tuple
    outs: tuple

    reads = property(lambda self: self.carry)
    writes = property(lambda self: self.outs)
    blocks = property(lambda self: (self.cond_block, self.body_block))


@_record
class If(Step):
    """Runs `then_block` if `pred` holds, else `else_block`, on `ins`; `outs` gets the
    branch's results."""

    kind: ClassVar[str] = "if"
    layout: ClassVar[tuple] = ("slot", "slots", "block", "slots", "slots", "block", "slots",
                               "slots", "slots")
    pred: int
    ins: tuple
    then_block: int
    then_in: tuple
    then_out: tuple
    else_block: int
    else_in: tuple
    else_out: tuple
    outs: tuple

    reads = property(lambda self: (self.pred,) + self.ins)
    writes = property(lambda self: self.outs)
    blocks = property(lambda self: (self.then_block, self.else_block))


@_record
class Call(Step):
    """Runs `body_block`, an outlined function's body shared by all its calls, on `ins`
    (copied to `body_in`); `outs` gets the body's `body_out`. `name` is the function's."""

    kind: ClassVar[str] = "call"
    layout: ClassVar[tuple] = ("slots", "callee", "slots", "slots", "slots", "name")
    ins: tuple
    body_block: int
    body_in: tuple
    body_out: tuple
    outs: tuple
    name: str

    reads = property(lambda self: self.ins)
    writes = property(lambda self: self.outs)
    blocks = property(lambda self: (self.body_block,))


STEP_KINDS = {cls.kind: cls for cls in (Exec, Read, Write, Infeed, Outfeed, Collective,
                                        While, If, Call)}


@_record
class ProfileRow:
    """For reports: a costed or control-flow step's op, Keras layer, cycles of one
    execution per kind, the blocks it runs (`host_transfer` for the program's I/O) and the
    IPU (within a replica) it runs on."""

    op: str
    layer: str
    cycles: dict
    blocks: tuple = ()
    ipu: int = 0


@_record
class Source:
    """Where a step comes from: its TensorFlow node and Keras layer."""

    node: str
    layer: str


@_record
class TileMapping:
    """Where a slot (or, in `TileFacts.variables`, a variable) lives: `per_tile` elements
    on each of `tiles` tiles from tile `start` on."""

    index: int
    start: int
    tiles: int
    per_tile: int

    @property
    def mapping(self):
        return (self.start, self.tiles, self.per_tile)


@_record
class TileView:
    """A slot that is a view of parts of other slots (a static slice, a split, a
    concatenation). Its flat elements are `groups`, each `(slot, size, first, pitch,
    length, count, at, step)`: `count` runs of `length` elements, run `j` being `slot`'s
    (of `size` elements) from `first + j * pitch` and the view's from `at + j * step`.
    It lives where those elements live (`slot` has a `TileMapping` or is a view)."""

    index: int
    groups: tuple


@_record
class StepTraffic:
    """A step's bytes received by its busiest tile as the cost model charges them, its
    source, and for a matmul plan that splits k or cuts 2-d blocks, `k_split`, its
    partials' bytes and its blocks' rows and columns (0 for flat chunks)."""

    received: int
    source: str
    k_split: int = 1
    partial_bytes: int = 0
    block_rows: int = 0
    block_cols: int = 0

    @property
    def planned(self):
        """Whether strict mode measures the step as its plan runs it."""
        return self.k_split > 1 or self.block_rows > 0


@_record
class TileFacts:
    """What the strict tile mode checks a block against (`simulator/strict.py`)."""

    slots: tuple
    steps: tuple
    variables: tuple = ()
    views: tuple = ()

    def to_data(self):
        return {"slots": [_mapping_data(m) for m in self.slots],
                "steps": [[int(t.received), t.source, int(t.k_split), int(t.partial_bytes),
                           int(t.block_rows), int(t.block_cols)] for t in self.steps],
                "variables": [_mapping_data(m) for m in self.variables],
                "views": [[int(v.index), [[int(x) for x in g] for g in v.groups]]
                          for v in self.views]}


def _mapping_data(m):
    return [int(m.index), int(m.start), int(m.tiles), int(m.per_tile)]


@_record
class Block:
    """A block of steps and what the compiler computed of it (module docstring)."""

    steps: tuple
    cycles: dict
    profile: tuple = ()
    sources: tuple = ()
    tiles: TileFacts = None
    pipeline: dict = None

    def to_data(self, encode):
        """The block as `executable.json` holds it (`encode` turns params and the pipeline
        schedule into JSON data)."""
        return {"steps": [step.to_data(encode) for step in self.steps],
                "cycles": {k: int(self.cycles[k]) for k in CYCLE_KINDS},
                "profile": [[r.op, r.layer, [int(r.cycles[k]) for k in CYCLE_KINDS],
                             [int(b) for b in r.blocks], int(r.ipu)] for r in self.profile],
                "sources": [[s.node, s.layer] for s in self.sources],
                "tiles": None if self.tiles is None else self.tiles.to_data(),
                "pipeline": encode(self.pipeline)}


# Per kind of field in a `Step.layout`: value, encode -> the field as JSON data.
_TO_DATA = {
    "slot": lambda v, encode: int(v), "block": lambda v, encode: int(v),
    "callee": lambda v, encode: int(v),
    "var": lambda v, encode: int(v), "infeed": lambda v, encode: int(v),
    "outfeed": lambda v, encode: int(v), "name": lambda v, encode: v,
    "slots": lambda v, encode: [int(s) for s in v], "params": lambda v, encode: encode(v),
}


def cycles_of(values):
    """{kind: cycles} of `values` in `CYCLE_KINDS` order."""
    return dict(zip(CYCLE_KINDS, values))


# -- loading: records from plain data, the structure distrusted --------------------------
@dataclasses.dataclass
class _Bounds:
    """What a loaded program's indices must stay within."""

    decode: object   # plain data -> params, arrays and tuples restored (`executable.py`)
    slots: int
    variables: int
    infeeds: int
    outfeeds: int
    blocks: int
    block: int = 0   # the block being read: its sub-blocks have larger indices


def _brief(value):
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _expect(ok, what, where, value):
    """Raises `Malformed` unless `ok`; `where` is a string or a tuple of its parts (the
    message is only built for a file that is refused)."""
    if not ok:
        where = where if isinstance(where, str) else "".join(str(p) for p in where)
        raise Malformed(what, f"{where}={_brief(value)}")


def _is_int(value):
    return type(value) is int or (isinstance(value, numbers.Integral)
                                  and not isinstance(value, bool))


def _index(value, stop, what, where, start=0):
    if type(value) is int and start <= value < stop:
        return value
    _expect(_is_int(value) and start <= value < stop, f"{what} in [{start}, {stop})", where,
            value)
    return int(value)


def _slot(value, bounds, where):
    return _index(value, bounds.slots, "a slot", where)


def _slots(value, bounds, where):
    stop = bounds.slots
    if type(value) is list and all(type(v) is int and 0 <= v < stop for v in value):
        return tuple(value)
    _expect(isinstance(value, list), "a list of slots", where, value)
    return tuple(_slot(v, bounds, where) for v in value)


def _of_type(kind, what):
    def check(value, bounds, where):
        _expect(isinstance(value, kind), what, where, value)
        return value
    return check


_params = _of_type(dict, "a dict of params")

# Per kind of field in a `Step.layout`: value, bounds, where -> the field's value, checked.
_FIELDS = {
    "slot": _slot,
    "slots": _slots,
    "block": lambda v, b, where: _index(v, b.blocks, "a sub-block", where, b.block + 1),
    "callee": lambda v, b, where: _callee(v, b, where),
    "var": lambda v, b, where: _index(v, b.variables, "a variable", where),
    "infeed": lambda v, b, where: _index(v, b.infeeds, "an infeed", where),
    "outfeed": lambda v, b, where: _index(v, b.outfeeds, "an outfeed", where),
    "name": _of_type(str, "a string"),
    "params": lambda v, b, where: _params(b.decode(v), b, where),
}


def _callee(value, bounds, where):
    """A call's body: any block but the main one and the caller's."""
    index = _index(value, bounds.blocks, "a body block", where, 1)
    _expect(index != bounds.block, "a body block other than the caller's", where, value)
    return index


def _list(value, what, where, length=None):
    _expect(isinstance(value, list) and (length is None or len(value) == length), what,
            where, value)
    return value


def step_from_data(data, bounds, where=("step",)):
    """The step record of `data` (`Step.to_data`'s list), its fields checked."""
    cls = STEP_KINDS.get(data[0]) if type(data) is list and data and type(data[0]) is str \
        else None
    if cls is None:
        _expect(False, f"a step, a list whose first element is one of {sorted(STEP_KINDS)}",
                where, data)
    if len(data) != len(cls.layout) + 1:
        _expect(False, f"a {cls.kind} step of {len(cls.layout) + 1} elements", where, data)
    return cls(*(_FIELDS[kind](value, bounds, (*where, ".", name))
                 for kind, name, value in zip(cls.layout, cls.__match_args__, data[1:])))


_CYCLES = f"cycles, a dict of ints with keys {list(CYCLE_KINDS)}"
_COUNTS = f"{len(CYCLE_KINDS)} cycle counts"


def _cycles(data, where):
    _expect(type(data) is dict and tuple(data) == CYCLE_KINDS
            and all(_is_int(c) for c in data.values()), _CYCLES, where, data)
    return data


def _profile_row(data, bounds, where):
    op, layer, cycles, blocks, ipu = _list(data, "a profile row of 5 elements", where, 5)
    _expect(isinstance(op, str) and isinstance(layer, str), "an op and a layer name", where,
            data)
    _expect(_is_int(ipu) and ipu >= 0, "an IPU index", where, data)
    cycles = _list(cycles, _COUNTS, where, len(CYCLE_KINDS))
    return ProfileRow(op, layer, _cycles(cycles_of(cycles), where),
                      tuple(_callee(b, bounds, where)   # a call's body may come first
                            for b in _list(blocks, "a list of sub-blocks", where)), ipu)


def _source(data, where):
    node, layer = _list(data, "a source, [node, layer]", where, 2)
    _expect(isinstance(node, str) and isinstance(layer, str), "names", where, data)
    return Source(node, layer)


def _mapping(data, stop, where):
    row = _list(data, "a tile mapping of 4 ints", where, 4)
    _expect(all(_is_int(v) and v >= 0 for v in row), "a tile mapping of 4 ints", where, row)
    _index(row[0], stop, "a slot or variable", where)
    return TileMapping(int(row[0]), int(row[1]), int(row[2]), int(row[3]))


def _traffic(data, where):
    received, source, *counts = _list(data, "a step's traffic of 6 elements", where, 6)
    _expect(all(_is_int(v) for v in [received, *counts]) and isinstance(source, str),
            "[received, source, k_split, partial_bytes, block_rows, block_cols]", where, data)
    return StepTraffic(int(received), source, *(int(v) for v in counts))


def _tile_facts(data, bounds, steps, where):
    if data is None:
        return None
    _expect(isinstance(data, dict) and sorted(data) == ["slots", "steps", "variables",
                                                        "views"],
            "tile facts with slots, steps, variables and views", where, data)
    traffic = _list(data["steps"], f"the traffic of {steps} steps", f"{where}.steps", steps)
    return TileFacts(
        tuple(_mapping(r, bounds.slots, f"{where}.slots") for r in
              _list(data["slots"], "a list", f"{where}.slots")),
        tuple(_traffic(t, f"{where}.steps") for t in traffic),
        tuple(_mapping(r, bounds.variables, f"{where}.variables") for r in
              _list(data["variables"], "a list", f"{where}.variables")),
        tuple(_view(v, bounds.slots, f"{where}.views") for v in
              _list(data["views"], "a list", f"{where}.views")))


def _view(data, stop, where):
    index, groups = _list(data, "a view, [slot, groups]", where, 2)
    _index(index, stop, "a slot", where)
    out = []
    for group in _list(groups, "a list of groups", where):
        row = _list(group, "a group of 8 ints", where, 8)
        _expect(all(_is_int(v) and v >= 0 for v in row), "a group of 8 ints", where, row)
        slot, size, first, pitch, length, count = row[:6]
        _expect(first + (count - 1) * pitch + length <= size if count else True,
                "a group [slot, size, first, pitch, length, count, at, step] inside its "
                "slot", where, row)
        _index(slot, stop, "a slot", where)
        out.append(tuple(int(v) for v in row))
    return TileView(int(index), tuple(out))


def _block_from_data(data, bounds):
    where = f"block {bounds.block}"
    names = sorted(f.name for f in dataclasses.fields(Block))
    _expect(isinstance(data, dict) and sorted(data) == names,
            f"a block, a dict with keys {names}", where, data)
    steps = tuple(step_from_data(s, bounds, (where, " step ", i))
                  for i, s in enumerate(_list(data["steps"], "a list of steps", where)))
    sources = _list(data["sources"], f"the sources of {len(steps)} steps",
                    f"{where}.sources", len(steps))
    pipeline = bounds.decode(data["pipeline"])
    _expect(pipeline is None or isinstance(pipeline, dict), "a pipeline schedule or null",
            f"{where}.pipeline", pipeline)
    return Block(
        steps=steps,
        cycles=_cycles(data["cycles"], f"{where}.cycles"),
        profile=tuple(_profile_row(r, bounds, f"{where}.profile") for r in
                      _list(data["profile"], "a list", f"{where}.profile")),
        sources=tuple(_source(s, f"{where}.sources") for s in sources),
        tiles=_tile_facts(data["tiles"], bounds, len(steps), f"{where}.tiles"),
        pipeline=pipeline)


def blocks_from_data(data, decode, slots, variables, infeeds, outfeeds):
    """The `Block`s of `data` (`Block.to_data`'s dicts) of a program with that many slots,
    variables, infeeds and outfeeds; `decode` restores params (`Block.to_data`'s
    `encode` undone). Raises `Malformed` where it is not well formed."""
    _expect(isinstance(data, list) and data, "a non-empty list of blocks", "blocks", data)
    bounds = _Bounds(decode, slots, variables, infeeds, outfeeds, len(data))
    blocks = []
    for index, block in enumerate(data):
        bounds.block = index
        blocks.append(_block_from_data(block, bounds))
    return blocks

