"""Every registered op has all its rules; every importer maps to registered ops.

TensorFlow-free: it checks the registry itself, whatever family an op lives in.
"""
import inspect

import ipu_keras._src.ops  # noqa: F401  (registers every family)
from ipu_keras._src.ops import registry


def test_every_op_has_every_rule():
    ops = registry.all_ops()
    assert len(ops) > 150
    for name, opdef in ops.items():
        assert callable(opdef.shape), f"{name}: no shape rule"
        assert callable(opdef.cost), f"{name}: no cost rule"
        assert opdef.mapping in registry.MAPPINGS, f"{name}: mapping {opdef.mapping!r}"
        assert opdef.engine or callable(opdef.kernel), f"{name}: no kernel"
        assert opdef.module.startswith("ipu_keras._src.ops."), f"{name}: registered from {opdef.module}"


def test_engine_ops_are_exactly_the_state_control_and_collective_ops():
    engine = {n for n, o in registry.all_ops().items() if o.engine}
    assert engine == {"read_var", "write_var", "infeed", "outfeed", "while", "if", "call",
                      "all_reduce", "replication_index"}


def test_every_importer_takes_a_node_and_a_builder():
    names = registry.supported_tf_ops()
    assert len(names) > 200 and names == sorted(names)
    for tf_type in names:
        importer = registry.get_importer(tf_type)
        assert list(inspect.signature(importer).parameters)[:2] == ["node", "b"], tf_type


def test_registering_an_op_without_a_kernel_is_refused():
    try:
        registry.register_op("no_kernel_op", shape=lambda t: t, cost=lambda *a: None,
                             mapping="linear")
    except ValueError as e:
        assert "needs a kernel" in str(e)
    else:
        raise AssertionError("an op without a kernel was registered")
    assert "no_kernel_op" not in registry.all_ops()


def test_a_pair_names_registered_ops_once():
    import pytest

    assert registry.get_pair("max_pool_grad", "relu_grad").name == "max_pool_grad+relu_grad"
    assert registry.get_pair("relu_grad", "max_pool_grad") is None
    assert registry.paired_ops() >= {"max_pool_grad"}
    with pytest.raises(KeyError, match="No IR op named 'no_such_op'"):
        registry.register_pair("max_pool_grad", "no_such_op", print, link=0)
    with pytest.raises(ValueError, match="registered twice"):
        registry.register_pair("max_pool_grad", "relu_grad", print, link=0, same=[(1, 0)])
