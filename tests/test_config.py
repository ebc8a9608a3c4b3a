"""IPUConfig: defaults, type checking, suggestions, targets and the active config.

No TensorFlow here: the config must be usable without it.
"""
import copy
import json
import pathlib
import pickle
import subprocess
import sys

import numpy as np
import pytest

from ipu_keras._src.device import config as config_lib
from ipu_keras.config import (
    DeviceConnectionType, IPUConfig, SelectionOrder, get_active_config, is_configured,
    reset_ipu_configuration,
)
from ipu_keras.errors import ConfigurationError


@pytest.fixture(autouse=True)
def _fresh_active_config():
    reset_ipu_configuration()
    yield
    reset_ipu_configuration()


DEFAULTS = {
    "auto_select_ipus": 0,
    "select_ipus": [],
    "ipu_model": {"compile_ipu_code": True, "tiles_per_ipu": 0, "version": "ipu2",
                  "strict_tile_mode": False},
    "matmuls": {"poplar_options": {}},
    "convolutions": {"poplar_options": {}},
    "floating_point_behaviour": {
        "inv": False, "div0": False, "oflo": False, "nanoo": False, "esr": False,
    },
    "allow_recompute": False,
    "selection_order": "AUTO",
    "device_connection": {"type": "ALWAYS", "version": "", "enable_remote_buffers": False},
    "executable_cache_path": "",
}


def test_defaults():
    assert IPUConfig().to_dict() == DEFAULTS


def test_to_dict_is_json_and_independent():
    c = IPUConfig()
    c.matmuls.poplar_options = {"availableMemoryProportion": "0.3"}
    d = c.to_dict()
    assert json.loads(json.dumps(d)) == d
    d["matmuls"]["poplar_options"]["partialsType"] = "half"
    assert c.matmuls.poplar_options == {"availableMemoryProportion": "0.3"}


def test_set_and_get_nested_options():
    c = IPUConfig()
    c.auto_select_ipus = 2
    c.ipu_model.tiles_per_ipu = 8
    c.ipu_model.version = "ipu1"
    c.ipu_model.compile_ipu_code = False
    c.floating_point_behaviour.esr = True
    c.convolutions.poplar_options = {"partialsType": "half"}
    c.executable_cache_path = "/tmp/cache"
    assert c.auto_select_ipus == 2
    assert (c.ipu_model.tiles_per_ipu, c.ipu_model.version) == (8, "ipu1")
    assert c.ipu_model.compile_ipu_code is False
    assert c.floating_point_behaviour.esr is True
    assert c.convolutions.poplar_options == {"partialsType": "half"}
    assert c.to_dict()["executable_cache_path"] == "/tmp/cache"


def test_instances_do_not_share_mutable_defaults():
    a, b = IPUConfig(), IPUConfig()
    a.select_ipus.append(3)
    a.matmuls.poplar_options["x"] = "y"
    assert b.select_ipus == [] and b.matmuls.poplar_options == {}


@pytest.mark.parametrize("setter, suggestion", [
    (lambda c: setattr(c, "auto_select_ipu", 1), "Did you mean 'auto_select_ipus'?"),
    (lambda c: setattr(c.ipu_model, "tile_per_ipu", 4), "Did you mean 'tiles_per_ipu'?"),
    (lambda c: setattr(c.floating_point_behaviour, "div_0", True), "Did you mean 'div0'?"),
    (lambda c: setattr(c, "tiles_per_ipu", 4), "Did you mean 'IPUConfig.ipu_model.tiles_per_ipu'?"),
    (lambda c: setattr(c.matmuls, "poplar_option", {}), "Did you mean 'poplar_options'?"),
])
def test_unknown_name_suggests_nearest(setter, suggestion):
    with pytest.raises(AttributeError) as info:
        setter(IPUConfig())
    assert suggestion in str(info.value)


def test_unknown_name_without_near_match_lists_valid_names():
    with pytest.raises(AttributeError, match="has no option 'zzz'. Valid names: "):
        IPUConfig().ipu_model.zzz = 1


def test_getting_unknown_name_also_suggests():
    with pytest.raises(AttributeError, match="Did you mean 'allow_recompute'?"):
        IPUConfig().allow_recompte  # noqa: B018


def test_categories_cannot_be_replaced_or_deleted():
    c = IPUConfig()
    with pytest.raises(AttributeError, match="is a category"):
        c.ipu_model = {"version": "ipu1"}
    with pytest.raises(AttributeError):
        del c.allow_recompute


def test_wrong_type_message():
    with pytest.raises(ConfigurationError) as info:
        IPUConfig().ipu_model.compile_ipu_code = "yes"
    assert str(info.value) == (
        "IPUConfig option 'ipu_model.compile_ipu_code' expected bool. "
        "Received: compile_ipu_code='yes'")


@pytest.mark.parametrize("path, value", [
    ("ipu_model.compile_ipu_code", 1),        # int is not bool
    ("ipu_model.tiles_per_ipu", True),         # bool is not int
    ("ipu_model.tiles_per_ipu", 4.0),
    ("ipu_model.tiles_per_ipu", "4"),
    ("auto_select_ipus", False),
    ("auto_select_ipus", [1, True]),
    ("select_ipus", "0"),
    ("ipu_model.version", 2),
    ("matmuls.poplar_options", {"availableMemoryProportion": 0.3}),
    ("matmuls.poplar_options", [("a", "b")]),
    ("allow_recompute", None),
    ("executable_cache_path", None),
])
def test_type_checking(path, value):
    node_path, _, leaf = path.rpartition(".")
    node = IPUConfig()
    for part in filter(None, node_path.split(".")):
        node = getattr(node, part)
    with pytest.raises(ConfigurationError, match=f"Received: {leaf}="):
        setattr(node, leaf, value)


def test_poplar_options_message_explains_string_values():
    with pytest.raises(ConfigurationError, match="values are strings"):
        IPUConfig().matmuls.poplar_options = {"availableMemoryProportion": 0.3}


def test_numbers_are_normalised():
    c = IPUConfig()
    c.ipu_model.tiles_per_ipu = np.int64(16)
    assert type(c.ipu_model.tiles_per_ipu) is int
    c.select_ipus = (0, np.int32(1))
    assert c.select_ipus == [0, 1] and all(type(x) is int for x in c.select_ipus)


def test_float_type_accepts_int_but_not_bool():
    opt = config_lib._Option(config_lib.FLOAT, 0.6, "a proportion")
    assert opt.validate("x.p", 1) == 1.0 and type(opt.validate("x.p", 1)) is float
    assert opt.validate("x.p", np.float32(0.5)) == 0.5
    with pytest.raises(ConfigurationError, match="expected float. Received: p=True"):
        opt.validate("x.p", True)


@pytest.mark.parametrize("path, value", [
    ("ipu_model.version", "ipu3"),
    ("selection_order", "RANDOM"),
    ("device_connection.type", "SOMETIMES"),
    ("ipu_model.tiles_per_ipu", -1),
    ("auto_select_ipus", -2),
    ("select_ipus", [0, -1]),
])
def test_value_checking(path, value):
    node_name, leaf = path.split(".") if "." in path else ("", path)
    node = getattr(IPUConfig(), node_name) if node_name else IPUConfig()
    with pytest.raises(ConfigurationError, match=f"Received: {leaf}="):
        setattr(node, leaf, value)


def test_version_choices_message():
    with pytest.raises(ConfigurationError) as info:
        IPUConfig().ipu_model.version = "ipu3"
    assert str(info.value).endswith(
        "expected one of ['ipu1', 'ipu2', 'ipu21']. Received: version='ipu3'")


def test_enum_like_options_accept_enums_and_any_case():
    c = IPUConfig()
    c.device_connection.type = DeviceConnectionType.ON_DEMAND
    c.selection_order = "zigzag"
    c.ipu_model.version = "IPU21"
    assert c.device_connection.type == "ON_DEMAND" and type(c.device_connection.type) is str
    assert c.selection_order == SelectionOrder.ZIGZAG == "ZIGZAG"
    assert c.ipu_model.version == "ipu21"
    assert json.dumps(c.to_dict())


@pytest.mark.parametrize("auto, select, expected", [
    (0, [], 1), (1, [], 1), (4, [], 4), ([2, 2], [], 2), (0, [0, 1], 2), (0, 5, 1),
])
def test_num_ipus(auto, select, expected):
    c = IPUConfig()
    c.auto_select_ipus = auto
    c.select_ipus = select
    assert c.num_ipus == expected


def test_target():
    c = IPUConfig()
    c.auto_select_ipus = 2
    c.ipu_model.version = "ipu1"
    c.ipu_model.tiles_per_ipu = 4
    t = c.target()
    assert (t.name, t.tiles_per_ipu, t.num_ipus, t.bytes_per_tile) == ("ipu1", 4, 2, 262_144)
    assert IPUConfig().target().tiles_per_ipu == 1472


def test_target_rejects_too_many_tiles_for_version():
    c = IPUConfig()
    c.ipu_model.version = "ipu1"
    c.ipu_model.tiles_per_ipu = 1472
    with pytest.raises(ConfigurationError, match="at most 1216.*Received: tiles_per_ipu=1472"):
        c.target()


def test_get_active_config_defaults_to_fresh_default():
    assert not is_configured()
    active = get_active_config()
    assert isinstance(active, IPUConfig) and active.to_dict() == DEFAULTS


def test_configure_ipu_system_snapshots():
    c = IPUConfig()
    c.auto_select_ipus = 1
    c.ipu_model.tiles_per_ipu = 16
    c.configure_ipu_system()
    assert is_configured()
    active = get_active_config()
    assert active == c and active is not c
    c.ipu_model.tiles_per_ipu = 32  # no effect until configured again
    assert get_active_config().ipu_model.tiles_per_ipu == 16
    assert get_active_config().target().tiles_per_ipu == 16
    c.configure_ipu_system()
    assert get_active_config().ipu_model.tiles_per_ipu == 32
    reset_ipu_configuration()
    assert not is_configured() and get_active_config().ipu_model.tiles_per_ipu == 0


def test_configure_validates():
    c = IPUConfig()
    c.auto_select_ipus = 2
    c.select_ipus = [0, 1]
    with pytest.raises(ConfigurationError, match="only one of auto_select_ipus and select_ipus"):
        c.configure_ipu_system()
    c.select_ipus = []
    c.ipu_model.version = "ipu1"
    c.ipu_model.tiles_per_ipu = 1300
    with pytest.raises(ConfigurationError, match="tiles_per_ipu"):
        c.configure_ipu_system()
    assert not is_configured()


def test_module_level_configure_ipu_system():
    c = IPUConfig()
    c.ipu_model.version = "ipu1"
    config_lib.configure_ipu_system(c)
    assert get_active_config().ipu_model.version == "ipu1"
    with pytest.raises(ConfigurationError, match="expected an IPUConfig. Received: config="):
        config_lib.configure_ipu_system({"ipu_model": {}})


def test_copy_pickle_from_dict_round_trip():
    c = IPUConfig()
    c.select_ipus = [1, 2]
    c.matmuls.poplar_options = {"partialsType": "half"}
    for other in (c.copy(), copy.deepcopy(c), pickle.loads(pickle.dumps(c)),
                  IPUConfig.from_dict(json.loads(json.dumps(c.to_dict())))):
        assert other == c and other is not c
        other.select_ipus = [3]
        assert c.select_ipus == [1, 2]
    assert IPUConfig.from_dict({"ipu_model": {"version": "ipu21"}}).ipu_model.version == "ipu21"
    with pytest.raises(AttributeError, match="Did you mean 'ipu_model'"):
        IPUConfig.from_dict({"ipu_modle": {}})
    with pytest.raises(ConfigurationError):
        IPUConfig.from_dict({"ipu_model": 3})


def test_repr_lists_every_option():
    text = repr(IPUConfig())
    assert text.startswith("IPUConfig(") and "ipu_model.version='ipu2'" in text
    assert "floating_point_behaviour.esr=False" in text
    assert "ipu_model" in dir(IPUConfig()) and "version" in dir(IPUConfig().ipu_model)


def test_spec_is_the_single_source():
    """Every option in the spec has a doc and a default that passes its own check."""
    for path in config_lib._leaf_paths(config_lib._SPEC):
        node = config_lib._SPEC
        for part in path.split("."):
            node = node[part]
        assert node.doc
        node.validate(path, copy.deepcopy(node.default))


def test_config_flags_and_targets_import_without_tensorflow():
    code = (
        "import sys\n"
        "import ipu_keras.config, ipu_keras._src.flags, ipu_keras._src.device.targets\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras'))\n"
        "assert not bad, bad\n"
    )
    repo_root = pathlib.Path(__file__).resolve().parents[1]
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120, cwd=repo_root)
