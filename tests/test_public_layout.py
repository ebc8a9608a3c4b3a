"""The public face is Graphcore's module layout, and only that (`docs/architecture.md`).

The top of `ipu_keras` holds the modules IPU TensorFlow users import, plus our own
`profiling`, `errors`, `compat` and `version`; the machinery is private, under `_src`.
Graphcore's op modules are `ipu_keras.ops.*`, also reached as `ipu.*`, as in the SDK.
"""
import pathlib

import pytest

import ipu_keras as ipu

PUBLIC = {
    "__init__", "__main__", "_src", "compat", "config", "distributed", "errors",
    "gradient_accumulation", "ipu_compiler", "ipu_infeed_queue", "ipu_outfeed_queue",
    "ipu_strategy", "keras", "loops", "ops", "optimizers", "profiling", "scopes", "serving",
    "sharding", "utils", "version",
}
OP_MODULES = ("application_compile_op", "cross_replica_ops", "custom_ops",
              "embedded_runtime", "embedding_ops", "functional_ops", "gen_ipu_ops",
              "nn_ops", "normalization_ops", "pipelining_ops", "rand_ops",
              "replication_ops")


def test_the_top_of_the_package_holds_only_the_public_modules():
    top = pathlib.Path(ipu.__file__).parent
    found = {p.stem for p in top.iterdir()
             if p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").exists())}
    assert found == PUBLIC


def test_graphcores_op_modules_import_from_ipu_keras_ops():
    from ipu_keras.ops import nn_ops, pipelining_ops, rand_ops  # noqa: F401

    assert pipelining_ops.__name__ == "ipu_keras.ops.pipelining_ops"
    assert callable(nn_ops.ctc_loss_v2) and callable(rand_ops.dropout)


@pytest.mark.parametrize("name", OP_MODULES)
def test_each_op_module_is_also_an_attribute_of_the_package(name):
    assert getattr(ipu, name) is getattr(ipu.ops, name)
    assert name in dir(ipu) and name in dir(ipu.ops)


def test_the_op_registry_is_private():
    assert not hasattr(ipu.ops, "get_op") and not hasattr(ipu.ops, "register_op")
    with pytest.raises(AttributeError, match="has no attribute 'registry'"):
        getattr(ipu.ops, "registry")
