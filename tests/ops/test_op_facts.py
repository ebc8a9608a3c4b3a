"""Every fact about an op lives on its definition (`ipu_keras/_src/ops/registry.py`).

Outside `ipu_keras/_src/ops/`, no module decides by an op's name: no comparison with an
IR op name and no module-level table of op names. Passes and the engine ask the op
(`get_op(eqn.op).role`, `.tile_rule`, `.plan`, `.exchange`, ...).

Some vocabularies share words with op names without being op names; a comparison
against them is allowed when its other side is one of `NOT_OP_NAMES` (a mapping, a plan
kind, a strict tile rule kind), and a table is allowed when it is one of `NOT_OP_TABLES`
(the kinds of a step record's fields, param names, Keras activation names).
"""
import ast
import pathlib

import pytest

from ipu_keras._src import ops
from ipu_keras._src.ir import TensorType
from ipu_keras._src.ops import registry

SRC = pathlib.Path(ops.__file__).resolve().parent.parent
OP_NAMES = frozenset(ops.all_ops())

NOT_OP_NAMES = {
    "opdef.mapping": "a tile-mapping preference (registry.MAPPINGS)",
    "get_op(step.op).mapping": "a tile-mapping preference (registry.MAPPINGS)",
    "opdef.plan": "a planner problem kind (registry.PLANS)",
    "plan": "a planner problem kind (registry.PLANS)",
    "getattr(plan, 'kind', '')": "a plan's kind (planner.Plan.kind)",
    "self.report.rule": "a strict tile rule kind (registry.TILE_RULES)",
    "before.argval": "a bytecode attribute name (the builder's `const` method)",
}

NOT_OP_TABLES = {
    ("device/steps.py", "_FIELDS"): "kinds of a step's fields ('infeed': a feed's index)",
    ("device/steps.py", "_TO_DATA"): "kinds of a step's fields ('infeed': a feed's index)",
    ("ir/verify.py", "_STATE_PARAMS"): "param names of the state and feed ops",
    ("conformance/catalogue.py", "_ACTIVATIONS"): "Keras activation names",
    **{("keras/execution_options.py", table): "queue options per feed kind (the model's "
       "infeed or outfeed queue), not ops" for table in ("_SET_BY_KERAS", "_NOT_FOR_KERAS",
                                                         "_KNOWN")},
}


def _modules():
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if not rel.startswith("ops/"):
            yield rel, ast.parse(path.read_text(), filename=str(path))


def _strings(node):
    """The string literals of a literal string, tuple, list or set."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [e.value for e in node.elts
                if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


def _name_comparisons(tree):
    """(line, op names, other side) of each comparison of something with op names."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left] + node.comparators
        for k, cmp in enumerate(node.ops):
            if not isinstance(cmp, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)):
                continue
            for this, other in ((sides[k], sides[k + 1]), (sides[k + 1], sides[k])):
                names = [s for s in _strings(this) if s in OP_NAMES]
                if names:
                    yield node.lineno, names, ast.unparse(other)


def _table_strings(value):
    if (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)
            and value.func.id in ("frozenset", "set", "tuple", "list") and value.args):
        value = value.args[0]
    if isinstance(value, ast.Dict):
        return [k.value for k in value.keys
                if isinstance(k, ast.Constant) and isinstance(k.value, str)]
    return _strings(value)


def _name_tables(tree):
    """(line, target, op names) of module-level tables holding two or more op names."""
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        names = [s for s in _table_strings(value) if s in OP_NAMES]
        if len(names) >= 2:
            for target in targets:
                yield node.lineno, ast.unparse(target), names


def test_no_module_outside_the_ops_compares_with_an_op_name():
    found = [f"{rel}:{line}: {other} vs {names}"
             for rel, tree in _modules()
             for line, names, other in _name_comparisons(tree)
             if other not in NOT_OP_NAMES]
    assert not found, "ask the op definition instead:\n" + "\n".join(found)


def test_no_module_outside_the_ops_keeps_a_table_of_op_names():
    found = [f"{rel}:{line}: {target} holds {names}"
             for rel, tree in _modules()
             for line, target, names in _name_tables(tree)
             if (rel, target) not in NOT_OP_TABLES]
    assert not found, "put the fact on the op definitions instead:\n" + "\n".join(found)


def test_the_finder_sees_an_op_name_test_and_a_table():
    tree = ast.parse('ROWS = ("softmax", "l2_loss")\n'
                     'def f(eqn):\n    return eqn.op == "write_var" or eqn.op in ("if",)\n')
    assert [t for _, t, _ in _name_tables(tree)] == ["ROWS"]
    assert sorted(n for _, names, _ in _name_comparisons(tree) for n in names) == [
        "if", "write_var"]
    assert not list(_name_comparisons(ast.parse('x = node.op == "Placeholder"')))


@pytest.mark.parametrize("name", sorted(OP_NAMES))
def test_every_op_has_every_fact_set_to_a_known_value(name):
    opdef = ops.get_op(name)
    assert opdef.role in registry.ROLES
    assert opdef.plan in registry.PLANS + (None,)
    assert opdef.exchange in registry.EXCHANGES
    assert callable(opdef.reduced_axes)
    rules = ({opdef.tile_rule({}), opdef.tile_rule({"expand": 1})} if callable(opdef.tile_rule)
             else {opdef.tile_rule})
    assert rules <= set(registry.TILE_RULES)
    if "probe" in rules:
        assert opdef.tile_moves == "all" or all(isinstance(i, int) for i in opdef.tile_moves)
    if "conv" in rules:
        assert callable(opdef.tile_axes)
    for fact in ("tile_index", "tile_axes", "problem"):
        value = getattr(opdef, fact)
        assert value is None or callable(value), fact
    assert opdef.tile_fill is None or isinstance(opdef.tile_fill, int)
    if opdef.plan in ("matmul", "conv"):
        assert opdef.mapping == "matmul"
    if opdef.role not in ("compute", "link_copy", "host_call"):   # these run their kernels
        assert opdef.engine or opdef.role == "constant"
    assert opdef.function in (True, False) or callable(opdef.function)


def test_the_ops_ipu_tensorflow_outlines_run_as_functions():
    # OutlineInstructions wraps dots, convolutions and batch norms (registry.py's `function`).
    def f16(*shape):
        return TensorType(shape, "float16")

    def is_function(a, b, out, **params):
        return ops.get_op("matmul").runs_as_function([f16(*a), f16(*b)], [f16(*out)], params)

    assert is_function((4, 8), (8, 3), (4, 3))
    assert is_function((4, 8), (3, 8), (4, 3), transpose_b=True)
    assert is_function((2, 8, 4), (2, 8, 3), (2, 4, 3), transpose_a=True)
    # A dot by a vector (m or n is 1) is a multiply and a reduce: no function.
    assert not is_function((1, 8), (8, 3), (1, 3))
    assert not is_function((4, 8), (8, 1), (4, 1))
    assert not is_function((8, 1), (8, 3), (1, 3), transpose_a=True)
    for name in ("conv", "conv_input_grad", "conv_filter_grad", "batch_norm",
                 "batch_norm_grad", "popnn_lstm", "popnn_lstm_grad", "popnn_gru",
                 "popnn_gru_grad"):
        assert ops.get_op(name).function is True, name
    assert ops.get_op("add").function is False


@pytest.mark.parametrize("equation,shapes,function", [
    ("abc,cd->abd", [(2, 5, 8), (8, 4)], True),                # EinsumDense: a dot
    ("BTNH,BSNH->BNTS", [(2, 3, 4, 8), (2, 5, 4, 8)], True),   # attention scores
    ("ij,j->i", [(4, 8), (8,)], False),                        # by a vector
    ("bj,bij->bi", [(2, 8), (2, 4, 8)], False),                # left: batch, contracted
    ("ab,cb->ac", [(1, 8), (3, 8)], False),                    # a free dimension of 1
    ("i,j->ij", [(4,), (3,)], True),                           # an outer product: a dot
    ("...ij,jk->...ik", [(2, 4, 8), (8, 3)], True),            # broadcast rows
    ("...j,jk->...k", [(8,), (8, 3)], False),                  # '...' empty: a vector
    ("ij->ji", [(4, 8)], False),                               # one operand: a transpose
])
def test_an_einsum_runs_as_a_function_when_its_dot_would(equation, shapes, function):
    in_types = [TensorType(s, "float32") for s in shapes]
    einsum = ops.get_op("einsum")
    out_types = einsum.shape(in_types, equation=equation)
    assert einsum.runs_as_function(in_types, out_types, {"equation": equation}) is function


def test_a_function_fact_must_be_a_bool_or_a_rule():
    with pytest.raises(ValueError, match="neither a bool nor a callable"):
        registry.register_op("not_an_op", shape=None, kernel=abs, cost=None,
                             mapping="elementwise", function="yes")


def test_the_two_old_tables_disagreement_on_l2_loss_is_kept():
    # Strict tile rule: whole rows; traffic and cost: a reduction tree (no behaviour change).
    l2 = ops.get_op("l2_loss")
    assert (l2.tile_rule, l2.exchange) == ("rows", "tree")
    assert ops.get_op("softmax").exchange == "rows"
