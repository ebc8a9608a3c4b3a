"""Compile-time facts about IR values, and how they flow through lists and loops.

Importers ask `node.static(i)` for operands that must be known at compile time
(shapes, lengths, axes). Some such operands are computed inside the traced graph, so
while importing, the tracer keeps two kinds of fact per IR value (keyed by value id):

* a constant: "this value is the array c" (from `const` equations and from folding
  pure equations whose inputs are constants, see `ops.evaluate`);
* a uniform list: "every element of this TensorList is the array c", or `EMPTY`, "this
  list has no element yet", which is compatible with any c. Facts are about lists as
  TensorFlow sees them (a list built by pushes holds the pushed elements only).

Facts form a lattice per value: unknown (None) above everything, `EMPTY` below every
uniform list. `join` is the least fact true of either of two values.

Lists: EmptyTensorList is `EMPTY`, TensorListReserve is uniform zeros (TensorFlow
reads unset elements as zeros), FromTensor of a constant whose rows are equal is
uniform; PushBack and SetItem join the list's fact with the item's constant; PopBack
and GetItem of a uniform list give its element as a constant.

Control flow: a called function (`call`, both branches of an `if`) starts from the
facts of its arguments; its results get the facts of its outputs (joined over the
branches). A `while` body runs many times, so `import_loop` assumes of the body's
inputs only what is true on every iteration. It starts from the initial carries'
facts (less the constants of carries the body computes from themselves, such as
counters, which the importer sees in the TensorFlow graph), imports the body, joins
its outputs' facts into the assumption, and imports the body again (into fresh
builders) until nothing changes. Facts only ever weaken, so this ends within a few
rounds, and the IR kept is the one imported under sound facts. The loop's results get
the join of the initial facts and the body's output facts.
"""
import typing

import numpy as np

from ipu_keras._src.ops.evaluate import MAX_FOLDED_ELEMENTS


class _Empty:
    def __repr__(self):
        return "EMPTY"


EMPTY = _Empty()
"""The list fact of a list with no element yet: compatible with every element."""


class Fact(typing.NamedTuple):
    """What is known of one value: a constant array, and/or the element of a list."""

    const: object = None   # np.ndarray or None
    items: object = None   # np.ndarray (every element), EMPTY, or None


UNKNOWN = Fact()


def _same(a, b):
    return a is b or (a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b))


def _join_array(a, b):
    return a if a is not None and b is not None and _same(a, b) else None


def _join_items(a, b):
    if a is EMPTY:
        return b
    if b is EMPTY:
        return a
    return _join_array(a, b)


def join(a, b):
    """The least fact true of a value that satisfies `a` or `b`; `a`'s parts if equal."""
    return Fact(_join_array(a.const, b.const), _join_items(a.items, b.items))


def weaker(new, old):
    """Whether `new` (a join involving `old`) says less than `old`."""
    return new.const is not old.const or new.items is not old.items


class Facts:
    """The facts of the values imported so far in one trace."""

    def __init__(self):
        self.consts = {}   # value id -> np.ndarray
        self.items = {}    # value id -> np.ndarray, EMPTY or None (None: a list, unknown)

    def of(self, value):
        if not hasattr(value, "id"):
            return UNKNOWN
        return Fact(self.consts.get(value.id), self.items.get(value.id))

    def const(self, value):
        return self.consts.get(value.id) if hasattr(value, "id") else None

    def assume(self, value, fact):
        """Record `fact` of a value that has no fact yet (a fresh value)."""
        if fact.const is not None:
            self.consts[value.id] = fact.const
        if fact.items is not None:
            self.items[value.id] = fact.items

    def set_items(self, value, items):
        """Record that `value` is a list whose elements satisfy `items`.

        An importer may hand back one of its operands as the list (a list made from a
        tensor is that tensor), so one value can stand for two lists: keep what holds
        of both.
        """
        if not hasattr(value, "id"):
            return
        if value.id in self.items:
            items = _join_items(self.items[value.id], items)
        self.items[value.id] = items

    # -- rules, run after each TensorFlow op is imported ---------------------------------
    def after_op(self, node, results):
        rule = _RULES.get(node.type)
        if rule is not None:
            rule(self, node, results)


def _element_zeros(value):
    element = value.type.shape[1:]
    if int(np.prod(element, dtype=np.int64)) > MAX_FOLDED_ELEMENTS:
        return None
    return np.zeros(element, value.type.dtype)


def _item(facts, value):
    """The fact of an item stored in a list: its constant, if known and small."""
    c = facts.const(value)
    return c if c is not None and c.size <= MAX_FOLDED_ELEMENTS else None


def _rule_empty(facts, node, results):
    facts.set_items(results[0], EMPTY)


def _rule_reserve(facts, node, results):
    facts.set_items(results[0], _element_zeros(results[0]))


def _rule_from_tensor(facts, node, results):
    c = facts.const(node.inputs[0])
    uniform = c is not None and len(c) > 0 and bool((c == c[:1]).all())
    facts.set_items(results[0], c[0].copy() if uniform else None)


def _rule_push(facts, node, results):
    items = facts.of(node.inputs[0]).items
    facts.set_items(results[0], _join_items(items, _item(facts, node.inputs[1])))


def _rule_set(facts, node, results):
    items = _join_items(facts.of(node.inputs[0]).items, _item(facts, node.inputs[2]))
    if node.attr("resize_if_index_out_of_bounds", False) and items is not None:
        items = _join_items(items, _element_zeros(results[0]))  # gaps read as zeros
    facts.set_items(results[0], items)


def _rule_pop(facts, node, results):
    items = facts.of(node.inputs[0]).items
    facts.set_items(results[0], items)
    _element_const(facts, items, results[1])


def _rule_get(facts, node, results):
    _element_const(facts, facts.of(node.inputs[0]).items, results[0])


def _element_const(facts, items, value):
    if items is not None and items is not EMPTY and value.id not in facts.consts:
        if items.shape == value.type.shape:
            facts.consts[value.id] = items.astype(value.type.dtype, copy=False)


def _rule_call(facts, node, results):
    """Results of a call or a conditional: what all the bodies it may run agree on."""
    bodies = list(node.called.values())
    if not bodies:   # a call marked as one IPU op: its importer's op, no body
        return
    dense = [v for v in results if hasattr(v, "id")]
    for i, value in enumerate(dense):
        fact = facts.of(bodies[0].outputs[i])
        for body in bodies[1:]:
            fact = join(fact, facts.of(body.outputs[i]))
        facts.assume(value, fact)


def _rule_while(facts, node, results):
    body = node.called["body"]
    dense = [(v, f) for v, f in zip(results, node.initial_facts) if hasattr(v, "id")]
    for (value, initial), out in zip(dense, body.outputs):
        facts.assume(value, join(initial, facts.of(out)))


_RULES = {
    "EmptyTensorList": _rule_empty,
    "TensorListReserve": _rule_reserve,
    "TensorListFromTensor": _rule_from_tensor,
    "TensorListPushBack": _rule_push,
    "TensorListSetItem": _rule_set,
    "TensorListPopBack": _rule_pop,
    "TensorListGetItem": _rule_get,
    "PartitionedCall": _rule_call,
    "StatefulPartitionedCall": _rule_call,
    "If": _rule_call,
    "StatelessIf": _rule_call,
    "While": _rule_while,
    "StatelessWhile": _rule_while,
}


def import_loop(facts, import_body, args, start, passed):
    """The loop-invariant facts of a while loop's carries, and its body imported under them.

    `import_body(assumed)` imports the body with its inputs assumed to satisfy `assumed`
    (one fact per arg) and returns the graph. `start` are the facts to try first (those
    of `args`, or less); `passed` those of the carries the body passes through unchanged,
    which are invariant for sure. A round whose assumptions turn out false may fail
    where the body is fine (a wrong static shape): the fixpoint then goes on from
    `passed`. Returns `(assumed, body)`.
    """
    assumed = list(start)
    while True:
        try:
            body = import_body(assumed)
        except Exception:
            if _at_most(assumed, passed):
                raise
            assumed = list(passed)
            continue
        outs = iter(body.outputs)
        joined = [f if not hasattr(a, "id") else join(f, facts.of(next(outs)))
                  for a, f in zip(args, assumed)]
        if not any(weaker(new, old) for new, old in zip(joined, assumed)):
            return assumed, body
        assumed = joined


def _at_most(assumed, passed):
    """Whether `assumed` says no more than `passed`, position by position."""
    return not any(weaker(join(a, p), a) for a, p in zip(assumed, passed))
