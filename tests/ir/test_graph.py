"""The IR: building, printing and verifying graphs."""
import numpy as np
import pytest

from ipu_keras.errors import CompilationError, UnsupportedDTypeError
from ipu_keras._src.ir import Equation, Graph, TensorType, Value, verify
from ipu_keras._src.ops.registry import get_op
from ipu_keras._src.ops.builder import Builder, new_input
from tests.graphs import counting_loop, dense_step


def test_builder_types_outputs_with_the_shape_rule():
    b = Builder()
    x = new_input((4, 3), "float32")
    y = b.emit("matmul", [x, b.const(np.ones((3, 5), np.float32))])
    assert y.type == TensorType((4, 5), "float32")


def test_printer_shows_ops_params_and_subgraphs():
    graph, _ = counting_loop()
    text = str(graph)
    assert "while(" in text and "cond:" in text and "body:" in text
    assert "infeed() {infeed=0" in text


def test_verifier_accepts_well_formed_graphs():
    verify(dense_step(), get_op)
    verify(counting_loop()[0], get_op)


def test_verifier_rejects_use_before_definition():
    x = new_input((2,), "float32")
    ghost = Value(TensorType((2,), "float32"))
    out = Value(TensorType((2,), "float32"))
    graph = Graph([x], [out], [Equation("add", [x, ghost], [out])])
    with pytest.raises(CompilationError, match="before it is defined"):
        verify(graph, get_op)


def test_verifier_rejects_wrong_recorded_types():
    x = new_input((2,), "float32")
    out = Value(TensorType((3,), "float32"))
    graph = Graph([x], [out], [Equation("add", [x, x], [out])])
    with pytest.raises(CompilationError, match="shape rule gives"):
        verify(graph, get_op)


def test_verifier_rejects_unknown_variable():
    graph = dense_step().replace(variables=[])
    with pytest.raises(CompilationError, match="names var 0"):
        verify(graph, get_op)


def test_verifier_rejects_double_definition():
    x = new_input((2,), "float32")
    graph = Graph([x], [x], [Equation("neg", [x], [x])])
    with pytest.raises(CompilationError):
        verify(graph, get_op)


@pytest.mark.parametrize("dtype", ["complex64", "complex128", "object", "<U3"])
def test_a_type_the_ipu_lacks_is_a_designed_error(dtype):
    with pytest.raises(UnsupportedDTypeError, match="The IPU has no .* type") as info:
        TensorType((2, 3), dtype)
    assert isinstance(info.value, TypeError) and "shape=(2, 3)" in str(info.value)
