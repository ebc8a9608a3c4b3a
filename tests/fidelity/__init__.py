"""The cycle and memory models against published figures (`test_published.py`,
`test_memory_fit.py`)."""
import pytest


def case_params(cases):
    """pytest params of a table of (case, workload) rows, named by the case, the slow ones
    marked."""
    return [pytest.param(c, w, id=c.name, marks=[pytest.mark.slow] if c.slow else [])
            for c, w in cases]
