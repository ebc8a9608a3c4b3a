"""Targets: the published figures, derived rates, errors and JSON round trip.

No TensorFlow here: the simulator must run without it.
"""
import ast
import inspect
import json

import numpy as np
import pytest

from ipu_keras.errors import ConfigurationError
from ipu_keras._src.device import targets
from ipu_keras._src.device.targets import Target, get_target

# IPU_REFERENCE.md section 1: (tiles, bytes per tile, clock, bank bytes).
PUBLISHED = {
    "ipu1": (1216, 262_144, 1.6e9, 32 * 1024),
    "ipu2": (1472, 638_976, 1.33e9, 16 * 1024),
    "ipu21": (1472, 638_976, 1.85e9, 16 * 1024),
}
# Peak TFLOP/s: (fp16 with fp32 accumulate, fp32).
PEAK_TFLOPS = {"ipu1": (124.5, 31.1), "ipu2": (250.0, 62.5), "ipu21": (350.0, 87.0)}


@pytest.mark.parametrize("version", sorted(PUBLISHED))
def test_published_figures(version):
    t = get_target(version)
    tiles, bytes_per_tile, clock, bank = PUBLISHED[version]
    assert t.name == version
    assert t.tiles_per_ipu == tiles
    assert t.bytes_per_tile == bytes_per_tile
    assert t.clock_hz == clock
    assert t.bank_bytes == bank
    assert t.workers_per_tile == 6
    assert t.exchange_bytes_per_cycle == 4
    assert t.num_ipus == 1


@pytest.mark.parametrize("version", sorted(PUBLISHED))
def test_amp_rates_reproduce_peak_flops(version):
    t = get_target(version)
    for dtype, peak in zip(("float16", "float32"), PEAK_TFLOPS[version]):
        flops = t.tiles_per_ipu * t.clock_hz * t.amp_macs_per_cycle[dtype] * 2
        assert flops / 1e12 == pytest.approx(peak, rel=0.01)


def test_total_memory_matches_reference():
    # The reference's "~304 MB" and "~900 MB" are MiB: 1216 x 256 KiB and 1472 x 624 KiB.
    assert get_target("ipu1").bytes_per_ipu == 304 * 2**20
    assert get_target("ipu2").bytes_per_ipu / 2**20 == pytest.approx(900, rel=0.01)


def test_links_and_sync():
    t = get_target("ipu2")
    # An IPU-M2000's two stages, as gc-hosttraffictest measured them (Gbit/s): host ->
    # gateway buffer 56.5, buffer -> tiles 26.4, tiles -> buffer 30.0, buffer -> host 23.5.
    assert t.host_link_bytes_per_second == 56.5e9 / 8
    assert t.ipu_stream_bytes_per_second == 26.4e9 / 8
    assert t.ipu_stream_out_bytes_per_second == 30.0e9 / 8
    assert t.host_link_out_bytes_per_second == 23.5e9 / 8
    mk1 = get_target("ipu1")   # the C2 card on the host's PCIe: one stage, both ways
    assert mk1.host_link_bytes_per_second == 64e9
    assert mk1.host_link_out_bytes_per_second == mk1.ipu_stream_bytes_per_second == 0
    assert t.ipu_link_bytes_per_second == 320e9
    assert t.ipu_links == 10
    assert get_target("ipu1").ipu_link_bytes_per_second == 192e9
    assert 10 <= t.internal_sync_cycles < 100 <= t.external_sync_cycles < 1000


def test_rates_by_dtype():
    t = get_target("ipu2")
    assert t.amp_macs("float16") == 64
    assert t.amp_macs(np.float32) == 16
    assert t.vector_elements_per_cycle(np.float32) == t.vector_flops_per_cycle == 2
    assert t.vector_elements_per_cycle("float16") == 4
    assert t.vector_elements_per_cycle(np.int32) == 1


def test_small_target_and_multi_ipu():
    t = get_target("ipu2", tiles_per_ipu=4, num_ipus=2)
    assert (t.tiles_per_ipu, t.num_ipus, t.num_tiles) == (4, 2, 8)
    assert t.bytes_per_tile == 638_976
    assert get_target("ipu1", tiles_per_ipu=1216).tiles_per_ipu == 1216
    assert get_target(tiles_per_ipu=np.int64(8)).tiles_per_ipu == 8


def test_default_is_ipu2():
    assert get_target() == get_target("ipu2", 0, 1)


def test_cycles_to_seconds():
    t = get_target("ipu21")
    assert t.cycles_to_seconds(1.85e9) == pytest.approx(1.0)
    assert t.cycles_to_seconds(0) == 0
    assert t.seconds_to_cycles(t.cycles_to_seconds(1234)) == pytest.approx(1234)
    np.testing.assert_allclose(t.cycles_to_seconds(np.array([1.85e9, 3.7e9])), [1.0, 2.0])


def test_unknown_version_message():
    with pytest.raises(ConfigurationError) as info:
        get_target("ipu3")
    assert str(info.value).endswith(
        "expected one of ['ipu1', 'ipu2', 'ipu21']. Received: version='ipu3'")


@pytest.mark.parametrize("tiles", [-1, 1217, 1.5, True, "4"])
def test_bad_tiles_per_ipu(tiles):
    with pytest.raises(ConfigurationError, match=r"Received: tiles_per_ipu="):
        get_target("ipu1", tiles_per_ipu=tiles)


@pytest.mark.parametrize("num_ipus", [0, -2, 1.0, False])
def test_bad_num_ipus(num_ipus):
    with pytest.raises(ConfigurationError, match=r"Received: num_ipus="):
        get_target(num_ipus=num_ipus)


def test_dict_round_trip_through_json():
    t = get_target("ipu1", tiles_per_ipu=16, num_ipus=4)
    d = t.to_dict()
    assert json.loads(json.dumps(d)) == d
    again = Target.from_dict(json.loads(json.dumps(d)))
    assert again == t
    assert hash(again) == hash(t)


def test_from_dict_errors():
    d = get_target().to_dict()
    with pytest.raises(ConfigurationError, match="unknown fields: \\['colour'\\]"):
        Target.from_dict({**d, "colour": "blue"})
    del d["clock_hz"]
    with pytest.raises(ConfigurationError, match="missing: \\['clock_hz'\\]"):
        Target.from_dict(d)
    with pytest.raises(ConfigurationError, match="expected a dict"):
        Target.from_dict([1, 2])


def test_target_is_immutable_and_hashable():
    t = get_target()
    with pytest.raises(AttributeError):
        t.tiles_per_ipu = 3
    macs = {"float16": 1, "float32": 1}
    custom = Target("ipu2", 2, 1024, 1e9, 512, macs, 1e9, 1e9)
    macs["float16"] = 99
    assert custom.amp_macs_per_cycle["float16"] == 1
    assert len({t, get_target("ipu2"), custom}) == 2


def test_standard_tiles_per_ipu():
    assert [targets.standard_tiles_per_ipu(v) for v in targets.VERSIONS] == [1216, 1472, 1472]


def test_imports_neither_tensorflow_nor_keras():
    tree = ast.parse(inspect.getsource(targets))
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    } | {
        node.module.split(".")[0]
        for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
    }
    assert not imported & {"tensorflow", "keras"}
