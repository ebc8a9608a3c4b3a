"""Human-readable text form of a graph, one equation per line."""
import numpy as np


def _param(value):
    if hasattr(value, "equations"):   # a sub-graph, as `format_graph` tells them below
        return "<graph>"
    if isinstance(value, np.ndarray):
        if value.size <= 4:
            return np.array2string(value, separator=",")
        return f"array<{value.dtype}{list(value.shape)}>"
    return repr(value)


def _placement(eqn):
    stage = "" if eqn.stage is None else f" stage {eqn.stage}"
    return f"  @ipu {eqn.shard}{stage}" if eqn.shard is not None else f"  @{stage.strip()}"


def format_graph(graph, indent=0):
    pad = "  " * indent
    lines = [f"{pad}graph({', '.join(map(repr, graph.inputs))}) {{"]
    for eqn in graph.equations:
        outs = ", ".join(map(repr, eqn.outputs))
        ins = ", ".join(f"%{v.id}" for v in eqn.inputs)
        params = ", ".join(
            f"{k}={_param(v)}" for k, v in sorted(eqn.params.items())
        )
        lhs = f"{outs} = " if outs else ""
        where = "" if eqn.shard is None and eqn.stage is None else _placement(eqn)
        lines.append(f"{pad}  {lhs}{eqn.op}({ins}){' {' + params + '}' if params else ''}"
                     f"{where}")
        for name, sub in sorted(eqn.params.items()):
            if hasattr(sub, "equations"):
                lines.append(f"{pad}    {name}:")
                lines.append(format_graph(sub, indent + 3))
    lines.append(f"{pad}  return {', '.join(f'%{v.id}' for v in graph.outputs)}")
    lines.append(f"{pad}}}")
    return "\n".join(lines)
