"""Target descriptions: the machines the simulator pretends to be.

A `Target` is a frozen, JSON-able description of a device: IPU version, how many
IPUs, tiles per IPU, bytes per tile, clock, and the per-tile rates the cost model
turns work into cycles with. It holds figures only; it computes nothing about a
program. `get_target()` builds the standard targets ("ipu1" = Mk1 GC2, "ipu2" =
Mk2 GC200, "ipu21" = Bow) and smaller ones for fast tests.

Sources (see `IPU_REFERENCE.md` section 1). Published figures are used as is;
every figure that is derived or estimated says so next to it:

* Tiles, SRAM per tile, clock, memory bank size: published.
* AMP multiply-accumulates per tile per cycle: derived from peak FLOP/s,
  `peak = tiles * clock * macs * 2`. Mk1: 124.5e12 / (1216 * 1.6e9 * 2) = 32 (fp16),
  31.1e12 / ... = 8 (fp32). Mk2: 250e12 / (1472 * 1.33e9 * 2) = 64 (fp16), 62.5e12
  -> 16 (fp32). Bow: 350e12 / (1472 * 1.85e9 * 2) = 64 (fp16), ~87e12 -> 16 (fp32).
* Vector (non-AMP) float32 throughput: 2 flops per tile per cycle, derived: a
  worker's floating-point datapath is 64 bits wide (2 x float32 or 4 x float16 per
  instruction) and the six workers are barrel-scheduled, each issuing one
  instruction every six cycles, so a fully occupied tile retires one vector
  instruction per cycle. Integer arithmetic has no SIMD path: 1 element per cycle.
* Exchange: ~4 bytes received per tile per cycle (derived; ~8 TB/s aggregate).
* memcpy: 8 bytes per tile per cycle, estimate: one 64-bit load and one 64-bit
  store per cycle on a fully occupied tile.
* Sync: estimates. Internal (one IPU) sync is a hardware barrier across the chip,
  modelled as 50 cycles; external sync crosses IPU-Links and the host-side sync
  logic, modelled as 500 cycles (hundreds of nanoseconds).
* Host link: the path a host stream takes, per direction. Mk1's C2 card sits on the
  host's PCIe (Gen4 x16, 64 GB/s as published for the IPU's interface), one stage. A Mk2
  or Bow IPU in an IPU-M2000 or Bow-2000 reaches the host in two stages: the host server
  to the machine's IPU-Gateway over RoCE (one host NIC for the machine's IPUs: Graphcore's
  IPU-POD DA build guide), landing in a buffer in the gateway's memory, then that buffer
  to the IPU's tiles over the IPU's own PCIe link to the gateway. Rates as measured by
  Graphcore's `gc-hosttraffictest` (IPU Command Line Tools 1.2.3 documentation, the tool's
  example output on an IPU-M2000, one IPU): host -> buffer 56.5 Gbit/s, buffer -> tiles
  26.4, tiles -> buffer 30.0, buffer -> host 23.5. The stages overlap (the gateway buffers
  ahead), so a stream copy takes as long as its slower stage (`cost.host_io_cycles`).
  `host_link_bytes_per_second` (and `..._out_`) is the shared first stage,
  `ipu_stream_bytes_per_second` (and `..._out_`) the per-IPU second one (0: no such
  stage). Bow: assumed the same as Mk2 (same gateway design).
* IPU-Links: aggregate per IPU. Mk1: 3 x 64 GB/s = 192 GB/s on a C2 card. Mk2: 10
  links, 320 GB/s total (published). Bow: assumed the same as Mk2 (same links).
  A transfer between two IPUs uses only the links that join them. In an IPU-M2000 (the
  block diagram of Graphcore's IPU-M2000 BMC User Guide, as vengineer.hatenablog.com
  reproduces it on 2023-01-23) the four IPUs form two pairs; the IPUs of a pair are
  joined by six links whose physical layer is PCIe Gen4 x8 (16 GB/s each way: ten such
  links, both ways, are the published 320 GB/s), and each IPU has two links to the rear
  connectors for other machines, which leaves two to the other pair's IPU beside it
  (the ladder's rail). `ipu_pair_links` and `ipu_rail_links` hold those counts (0: a
  transfer may use every link, as modelled for Mk1's C2 card).
* Bow's memory bank size is not published: assumed the same as Mk2 (16 KiB), as the
  Bow IPU reuses the Mk2 processor die.

This module imports numpy only; it must never import TensorFlow or Keras.
"""
import dataclasses

import numpy as np

from ipu_keras.errors import ConfigurationError

VERSIONS = ("ipu1", "ipu2", "ipu21")
"""The IPU versions a target can describe, oldest first."""

WORKERS_PER_TILE = 6
"""Hardware worker contexts per tile (plus one supervisor), on every version."""

_KiB = 1024

# Per-version figures. Keys are `Target` field names; derivations are in the
# module docstring.
_STANDARD = {
    "ipu1": dict(
        tiles_per_ipu=1216,
        bytes_per_tile=256 * _KiB,
        clock_hz=1.6e9,
        bank_bytes=32 * _KiB,
        amp_macs_per_cycle={"float16": 32, "float32": 8},
        host_link_bytes_per_second=64e9,
        ipu_link_bytes_per_second=3 * 64e9,
        ipu_links=3,
    ),
    "ipu2": dict(
        tiles_per_ipu=1472,
        bytes_per_tile=624 * _KiB,
        clock_hz=1.33e9,
        bank_bytes=16 * _KiB,
        amp_macs_per_cycle={"float16": 64, "float32": 16},
        host_link_bytes_per_second=56.5e9 / 8,
        host_link_out_bytes_per_second=23.5e9 / 8,
        ipu_stream_bytes_per_second=26.4e9 / 8,
        ipu_stream_out_bytes_per_second=30.0e9 / 8,
        ipu_link_bytes_per_second=320e9,
        ipu_links=10,
        ipu_pair_links=6,
        ipu_rail_links=2,
    ),
    "ipu21": dict(
        tiles_per_ipu=1472,
        bytes_per_tile=624 * _KiB,
        clock_hz=1.85e9,
        bank_bytes=16 * _KiB,
        amp_macs_per_cycle={"float16": 64, "float32": 16},
        host_link_bytes_per_second=56.5e9 / 8,
        host_link_out_bytes_per_second=23.5e9 / 8,
        ipu_stream_bytes_per_second=26.4e9 / 8,
        ipu_stream_out_bytes_per_second=30.0e9 / 8,
        ipu_link_bytes_per_second=320e9,
        ipu_links=10,
        ipu_pair_links=6,
        ipu_rail_links=2,
    ),
}


@dataclasses.dataclass(frozen=True)
class Target:
    """A simulated IPU device: the figures the compiler and the cost model read.

    Build one with `get_target()`; construct directly only to describe a machine
    that is not one of the standard versions.

    Attributes:
        name: IPU version, one of `VERSIONS`.
        tiles_per_ipu: Tiles on each IPU (may be fewer than the standard count).
        bytes_per_tile: SRAM per tile, in bytes.
        clock_hz: Tile clock, in Hz.
        bank_bytes: Size of one tile memory bank, in bytes.
        amp_macs_per_cycle: dtype name -> multiply-accumulates per tile per cycle
            on the Accumulating Matrix Product unit ("float16", "float32").
        host_link_bytes_per_second: Host -> device bandwidth of the host's link, which
            every IPU of the device shares.
        host_link_out_bytes_per_second: Device -> host bandwidth of that link (0: the
            same as `host_link_bytes_per_second`).
        ipu_stream_bytes_per_second: Bandwidth of each IPU's own stage of a host stream
            into its tiles (an IPU-Machine's gateway buffer -> tiles; 0: no such stage).
        ipu_stream_out_bytes_per_second: The same stage out of the tiles (0: the same as
            `ipu_stream_bytes_per_second`).
        ipu_link_bytes_per_second: Aggregate IPU-Link bandwidth of one IPU.
        ipu_links: Number of IPU-Links on one IPU.
        ipu_pair_links: IPU-Links joining an IPU to its partner in its machine (IPUs
            2i and 2i + 1; 0: a transfer may use all `ipu_links`).
        ipu_rail_links: IPU-Links joining an IPU to the other pair's IPU beside it.
        num_ipus: IPUs in the device.
        workers_per_tile: Hardware worker contexts per tile.
        exchange_bytes_per_cycle: Bytes one tile can receive per cycle in an
            exchange phase.
        vector_flops_per_cycle: float32 element operations per tile per cycle on
            the vector (non-AMP) path, all workers busy.
        memcpy_bytes_per_cycle: Bytes one tile can copy within its own memory per
            cycle (estimate).
        internal_sync_cycles: Cycles of one sync across the tiles of one IPU
            (estimate).
        external_sync_cycles: Cycles of one sync across all IPUs (estimate).
    """

    name: str
    tiles_per_ipu: int
    bytes_per_tile: int
    clock_hz: float
    bank_bytes: int
    amp_macs_per_cycle: dict
    host_link_bytes_per_second: float
    ipu_link_bytes_per_second: float
    ipu_links: int = 0
    num_ipus: int = 1
    workers_per_tile: int = WORKERS_PER_TILE
    exchange_bytes_per_cycle: int = 4
    vector_flops_per_cycle: int = 2
    memcpy_bytes_per_cycle: int = 8
    internal_sync_cycles: int = 50
    external_sync_cycles: int = 500
    host_link_out_bytes_per_second: float = 0.0
    ipu_stream_bytes_per_second: float = 0.0
    ipu_stream_out_bytes_per_second: float = 0.0
    ipu_pair_links: int = 0
    ipu_rail_links: int = 0

    def __post_init__(self):
        # Own a private copy, so the frozen target cannot change under its users.
        object.__setattr__(self, "amp_macs_per_cycle", dict(self.amp_macs_per_cycle))

    def __hash__(self):
        return hash(tuple(
            tuple(sorted(v.items())) if isinstance(v, dict) else v
            for v in dataclasses.astuple(self)
        ))

    @property
    def num_tiles(self):
        """int: Tiles in the whole device (`num_ipus * tiles_per_ipu`)."""
        return self.num_ipus * self.tiles_per_ipu

    @property
    def bytes_per_ipu(self):
        """int: In-processor memory of one IPU, in bytes."""
        return self.tiles_per_ipu * self.bytes_per_tile

    def amp_macs(self, dtype):
        """AMP multiply-accumulates per tile per cycle for an input dtype.

        Args:
            dtype: A numpy dtype or dtype name. float16 inputs use the float16
                rate; every other dtype runs at the float32 rate.

        Returns:
            int: multiply-accumulates per tile per cycle.
        """
        key = "float16" if np.dtype(dtype) == np.float16 else "float32"
        return self.amp_macs_per_cycle[key]

    def vector_elements_per_cycle(self, dtype):
        """Elements one tile processes per cycle on the vector path, for a dtype.

        The 64-bit datapath gives float32 `vector_flops_per_cycle` and float16
        twice that; integer and boolean ops run on the scalar path, 1 per cycle.

        Args:
            dtype: A numpy dtype or dtype name.

        Returns:
            int: elements per tile per cycle.
        """
        dtype = np.dtype(dtype)
        if dtype == np.float16:
            return 2 * self.vector_flops_per_cycle
        if dtype.kind == "f":
            return self.vector_flops_per_cycle
        return 1

    def cycles_to_seconds(self, cycles):
        """Converts a cycle count on this target into seconds.

        Args:
            cycles: Cycles (int, float or numpy array).

        Returns:
            Seconds, same kind as `cycles` (float for scalars).
        """
        return cycles / self.clock_hz

    def seconds_to_cycles(self, seconds):
        """Converts seconds into (fractional) cycles on this target."""
        return seconds * self.clock_hz

    def to_dict(self):
        """Returns the target as a plain, JSON-able dict (see `from_dict`)."""
        out = dataclasses.asdict(self)
        out["amp_macs_per_cycle"] = dict(self.amp_macs_per_cycle)
        return out

    @classmethod
    def from_dict(cls, d):
        """Rebuilds a target from the output of `to_dict`.

        Args:
            d: A dict with exactly the fields of `Target` (fields with defaults may
                be omitted).

        Returns:
            Target: the target.

        Raises:
            ConfigurationError: if a field is unknown or a required one is missing.
        """
        if not isinstance(d, dict):
            raise ConfigurationError(
                f"Target.from_dict() expected a dict. Received: d={d!r}")
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - set(fields))
        if unknown:
            raise ConfigurationError(
                f"Target.from_dict() expected only the fields {sorted(fields)}. "
                f"Received unknown fields: {unknown}")
        required = [
            n for n, f in fields.items()
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        ]
        missing = [n for n in required if n not in d]
        if missing:
            raise ConfigurationError(
                f"Target.from_dict() expected the fields {required}. "
                f"Received a dict missing: {missing}")
        return cls(**d)


def standard_tiles_per_ipu(version):
    """Returns the standard number of tiles per IPU of a version.

    Args:
        version: One of `VERSIONS`.

    Returns:
        int: tiles per IPU.
    """
    _check_version(version)
    return _STANDARD[version]["tiles_per_ipu"]


def get_target(version="ipu2", tiles_per_ipu=0, num_ipus=1):
    """Returns the target of a standard IPU version, optionally with fewer tiles.

    Args:
        version: IPU version, one of "ipu1" (Mk1), "ipu2" (Mk2) or "ipu21" (Bow).
        tiles_per_ipu: Tiles per IPU; 0 means the version's standard count. A
            smaller count gives a small, fast target (the IPU Model allows the same).
        num_ipus: IPUs in the device.

    Returns:
        Target: the target.

    Raises:
        ConfigurationError: if an argument is not valid.

    Example:

    >>> get_target("ipu2", tiles_per_ipu=4).bytes_per_tile
    638976
    """
    _check_version(version)
    standard = _STANDARD[version]
    full = standard["tiles_per_ipu"]
    if not _is_int(tiles_per_ipu) or not 0 <= tiles_per_ipu <= full:
        raise ConfigurationError(
            f"get_target() expected tiles_per_ipu to be 0 (the standard count) or a positive "
            f"int of at most {full} for version '{version}'. "
            f"Received: tiles_per_ipu={tiles_per_ipu!r}")
    if not _is_int(num_ipus) or num_ipus < 1:
        raise ConfigurationError(
            f"get_target() expected num_ipus to be a positive int. Received: num_ipus={num_ipus!r}")
    fields = dict(standard)
    fields["tiles_per_ipu"] = int(tiles_per_ipu) or full
    return Target(name=version, num_ipus=int(num_ipus), **fields)


def _check_version(version):
    if version not in VERSIONS:
        raise ConfigurationError(
            f"The IPU version is not known: expected one of {list(VERSIONS)}. "
            f"Received: version={version!r}")


def _is_int(value):
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))
