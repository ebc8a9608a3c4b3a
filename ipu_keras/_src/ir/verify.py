"""The IR verifier: checks that a graph is well formed before and after every pass.

Checks: each value is defined once and before use; sub-graphs are closed (they see
only their own inputs); every op is registered and its shape rule reproduces the
recorded output types; variable and feed indices are in range. The op definitions stand
above the IR, so the caller hands in their look-up (`ops.registry.get_op`).
"""
from ipu_keras.errors import CompilationError

_STATE_PARAMS = {"var": "variables", "infeed": "infeeds", "outfeed": "outfeeds"}


def verify(graph, get_op, root=None):
    """Raise `CompilationError` describing the first problem found; return the graph.

    `get_op(name)` returns the op definition named `name` or raises `KeyError`.
    """
    root = root or graph
    defined = set()
    for value in graph.inputs:
        _define(value, defined, "graph input")
    for eqn in graph.equations:
        where = f"equation '{eqn.op}' from {eqn.source}"
        for value in eqn.inputs:
            if value.id not in defined:
                raise CompilationError(f"{where} uses %{value.id} before it is defined.")
        try:
            opdef = get_op(eqn.op)
        except KeyError as e:
            raise CompilationError(f"{where}: {e}") from None
        expected = opdef.shape([v.type for v in eqn.inputs], **eqn.params)
        actual = [v.type for v in eqn.outputs]
        if list(expected) != actual:
            raise CompilationError(
                f"{where} has output types {actual} but its shape rule gives {list(expected)}."
            )
        for param, table in _STATE_PARAMS.items():
            if param in eqn.params and not 0 <= eqn.params[param] < len(getattr(root, table)):
                raise CompilationError(f"{where} names {param} {eqn.params[param]}, not defined.")
        for sub in eqn.subgraphs():
            verify(sub, get_op, root)
        for value in eqn.outputs:
            _define(value, defined, where)
    for value in graph.outputs:
        if value.id not in defined:
            raise CompilationError(f"Graph output %{value.id} is never defined.")
    return graph


def _define(value, defined, where):
    if value.id in defined:
        raise CompilationError(f"{where} defines %{value.id} a second time.")
    defined.add(value.id)
