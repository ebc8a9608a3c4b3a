"""Every catalogue item trains on the simulated IPU as TensorFlow trains it on the CPU.

One case per item of `ipu_keras._src.conformance.catalogue` (ids are the item names), each
asserting the status "ok" of `run_item`: the same losses, metrics, predictions, final
weights and optimizer variables within the item's tolerance. The selected items run in
a process of their own while the rest of the suite runs (`conftest.py`: its
`IPU_KERAS_CONFORMANCE_WORKERS` processes, default 2, or 1 on a single core), and
their cases come last; `-k` selects items by name as usual. The item cases are marked
slow (about three minutes of two cores); the catalogue's coverage checks are not.
"""
import keras
import pytest

from ipu_keras._src.conformance.catalogue import catalogue

ITEMS = {item.name: item for item in catalogue()}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(ITEMS), ids=list(ITEMS))
def test_item_matches_tensorflow(name, catalogue_results):
    result = catalogue_results[name]
    assert result.status == "ok", f"{name}: {result.status}: {result.detail}"


def test_item_names_are_unique():
    assert len(ITEMS) == len(catalogue())


def _public(module, exclude):
    return {n for n in dir(module) if not n.startswith("_") and n not in exclude}


def test_every_activation_has_an_item():
    names = _public(keras.activations, {"get", "serialize", "deserialize"})
    missing = {n for n in names if f"activation {n}" not in ITEMS}
    assert not missing


def _squashed(name):
    return name.replace("_", "").lower()


def test_every_loss_class_has_an_item():
    """Each keras.losses class, by its name or its function's ("loss kl_divergence")."""
    classes = {n for n in _public(keras.losses, {"Loss"})
               if isinstance(getattr(keras.losses, n), type)}
    covered = {_squashed(name.split()[1]) for name in ITEMS if name.startswith("loss ")}
    assert not {n for n in classes if _squashed(n) not in covered}
