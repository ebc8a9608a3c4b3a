"""Helpers for passes that rebuild graphs: value substitution through sub-graphs."""
import dataclasses

from ipu_keras._src.ir.graph import Graph


def map_graph(graph, fn):
    """Rebuild `graph` bottom-up with `fn(equations, outputs) -> (equations, outputs)`."""
    equations = []
    for eqn in graph.equations:
        if eqn.subgraphs():
            params = {k: map_graph(v, fn) if isinstance(v, Graph) else v
                      for k, v in eqn.params.items()}
            eqn = dataclasses.replace(eqn, params=params)
        equations.append(eqn)
    equations, outputs = fn(equations, list(graph.outputs))
    return graph.replace(equations=equations, outputs=outputs)


def substitute(values, mapping):
    return [mapping.get(v.id, v) for v in values]
