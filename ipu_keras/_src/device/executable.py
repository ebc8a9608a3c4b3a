"""The IPU executable: plain data that the simulator interprets.

An `Executable` is programs (blocks of steps), the slots they use, the variables
and streams they touch, cost tables per block and the memory plan. It is saved as
one zip file holding `executable.json` and `constants.npz`, with a SHA-256 checksum
over both; loading never unpickles anything and refuses a truncated or altered file
with `ExecutableFormatError`. A checksum is no signature, so loading also distrusts
the file's structure: before a byte is decompressed it refuses members with other
names (a path such as `../x`), compressed members (a zip bomb) and members, or arrays
declared in `.npy` headers, larger than the archive that holds them.

Programs are typed records (`steps.py`): each block a `Block`, each step a frozen record
of its kind (`Exec`, `Read`, `Write`, `Infeed`, `Outfeed`, `Collective`, `While`, `If`,
`Call`) with named fields. In the file they are plain JSON (a step is its kind, then its
fields in order: `["exec", op, ins, outs, params]`), rebuilt and checked on loading: a
malformed step or block, or a field naming a slot, variable, feed or block out of range,
is refused with `ExecutableFormatError` as well, and so is a file of another
`FORMAT_VERSION` (2 since the steps were typed, 3 since outlined functions' `Call` steps,
4 since profile rows name their IPU, 5 since a step's traffic names a 2-d plan's blocks,
6 since the tile facts list the views; the executable cache's keys hold the version, so
such an entry is recompiled). Block 0 is the main program; a block's sub-blocks have
larger indices, except the shared body of an outlined function's calls. `constants`
lists [slot, array] pairs the engine presets before running.

A file may carry a `binding` (JSON data: the executable cache's key and graph
fingerprint); `load(path, binding)` refuses a file not saved with that binding. Once the
records are rebuilt, `checks.py` checks what they mean (registered ops whose kernels take
their operands and params, slots written before they are read, a well-formed target and
interface), and params and info nested deeper than `_MAX_DEPTH` are refused, so that a
file that loads is one the engine can run. A path that is not a regular file (a FIFO, a
directory) is refused without being read.
"""
import dataclasses
import hashlib
import io
import json
import math
import os
import re
import stat
import zipfile

import numpy as np

from ipu_keras._src.device.checks import check_program
from ipu_keras._src.device.steps import CYCLE_KINDS, Malformed, blocks_from_data
from ipu_keras.errors import ExecutableFormatError

FORMAT_VERSION = 6
_MAX_DEPTH = 64
"""How deep params and info may nest (the compiler writes a few levels)."""
_MEMBERS = ("executable.json", "constants.npz", "checksum")
_HEADER_READERS = {(1, 0): np.lib.format.read_array_header_1_0,
                   (2, 0): np.lib.format.read_array_header_2_0}


@dataclasses.dataclass
class Executable:
    target: dict
    num_slots: int
    inputs: list
    outputs: list
    input_types: list
    output_types: list
    variables: list
    infeeds: list
    outfeeds: list
    blocks: list
    constants: list
    memory: dict
    info: dict = dataclasses.field(default_factory=dict)

    def save(self, path, binding=None):
        """Writes the executable to `path`; `binding` (JSON data, e.g. the executable
        cache's key and graph fingerprint) is recorded for `load` to check."""
        # Its fields as they are: `_encode` builds new containers, so `dataclasses.asdict`'s
        # deep copy of every step and param (0.18 s for ResNet-50's train step) is not needed.
        encode, constants = _encoder()
        payload = {field.name: encode(getattr(self, field.name))
                   for field in dataclasses.fields(self) if field.name != "blocks"}
        payload["blocks"] = [block.to_data(encode) for block in self.blocks]
        document = {"format": FORMAT_VERSION, "executable": payload}
        if binding is not None:
            document["binding"] = binding
        body = json.dumps(document).encode()
        buffer = io.BytesIO()
        np.savez(buffer, **constants)
        arrays = buffer.getvalue()
        digest = hashlib.sha256(body + arrays).hexdigest()
        with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
            archive.writestr("executable.json", body)
            archive.writestr("constants.npz", arrays)
            archive.writestr("checksum", digest)

    @classmethod
    def load(cls, path, binding=None):
        """The executable saved at `path`; with `binding`, only if it was saved with it.

        Raises:
            ExecutableFormatError: for a file that is not a regular file, is truncated,
                altered, of another format, not bound to `binding`, or a program that is
                not well formed (module docstring).
            FileNotFoundError: if there is no file at `path`.
        """
        body, arrays, digest = _read_members(path)
        if hashlib.sha256(body + arrays).hexdigest() != digest:
            raise ExecutableFormatError(
                f"The executable '{path}' does not match its checksum: it was altered or "
                "damaged after it was written. Recompile it."
            )
        document = _json(path, body)
        if not isinstance(document, dict):
            document = {}
        if document.get("format") != FORMAT_VERSION:
            raise ExecutableFormatError(
                f"Executable format {FORMAT_VERSION} expected. Received: "
                f"format={document.get('format')!r:.80} in '{path}'. Recompile it."
            )
        if binding is not None and document.get("binding") != binding:
            _unbound(path, binding, document.get("binding"))
        try:
            decode = _decoder(_read_constants(path, arrays))
            fields = _checked_fields(document.get("executable"), decode)
            check_program(fields)
            return cls(**fields)
        except Malformed as e:
            _refuse(path, *e.args)


def _json(path, body):
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as e:
        raise ExecutableFormatError(
            f"The file '{path}' is not a well-formed ipu_keras executable: expected JSON in "
            f"executable.json. Received: error {e!r}. Recompile it."
        ) from None


_FIELD_TYPES = {"target": dict, "num_slots": int, "inputs": list, "outputs": list,
                "input_types": list, "output_types": list, "variables": list,
                "infeeds": list, "outfeeds": list, "blocks": list, "constants": list,
                "memory": dict, "info": dict}


def _checked_fields(data, decode):
    """The fields of a loaded `Executable` (`data`, decoded by `decode`), each of the type
    it has when compiled, the slots of its inputs, outputs and constants in range and its
    blocks typed records."""
    names = sorted(_FIELD_TYPES)
    if not isinstance(data, dict) or sorted(data) != names:
        raise Malformed(f"an executable with fields {names}",
                        f"{sorted(data) if isinstance(data, dict) else type(data)}")
    fields = {name: decode(value) for name, value in data.items() if name != "blocks"}
    fields["blocks"] = data["blocks"]
    for name, kind in _FIELD_TYPES.items():
        if not isinstance(fields[name], kind) or isinstance(fields[name], bool):
            raise Malformed(f"{name} of type {kind.__name__}",
                            f"{type(fields[name]).__name__}")
    slots = fields["num_slots"]
    for name in ("inputs", "outputs"):
        if not all(type(s) is int and 0 <= s < slots for s in fields[name]):
            raise Malformed(f"{name}, slots in [0, {slots})", f"{fields[name]!r:.80}")
    for pair in fields["constants"]:
        if not (isinstance(pair, list) and len(pair) == 2 and type(pair[0]) is int
                and 0 <= pair[0] < slots and isinstance(pair[1], (np.ndarray, np.generic))):
            raise Malformed("constants, [slot, array] pairs", f"{pair!r:.80}")
    fields["blocks"] = blocks_from_data(fields["blocks"], decode, slots,
                                        len(fields["variables"]), len(fields["infeeds"]),
                                        len(fields["outfeeds"]))
    return fields


def _unbound(path, binding, received):
    if isinstance(binding, dict) and isinstance(received, dict):
        received = ", ".join(f"{k}={received.get(k)!r:.80}" for k in binding)
    raise ExecutableFormatError(
        f"The file '{path}' is not the executable asked for: expected one bound to "
        + ", ".join(f"{k}={v!r}" for k, v in dict(binding).items())
        + f". Received: {received!r:.300}. It was compiled from another graph or with other "
        "options, or copied or renamed. Recompile it."
    )


def _refuse(path, what, received):
    raise ExecutableFormatError(
        f"The file '{path}' is not a well-formed ipu_keras executable: expected {what}. "
        f"Received: {received}. Recompile it; never load executables from untrusted sources."
    )


def _checked_members(path, archive, limit, expected=None, pattern=None):
    """The archive's members, refused before anything is decompressed unless each one is
    stored (not compressed), has an expected name and a size within `limit` bytes."""
    members = archive.infolist()
    for info in members:
        name = info.filename
        if (expected is not None and name not in expected
                or pattern is not None and not re.fullmatch(pattern, name)):
            _refuse(path, f"members named {sorted(expected or [pattern])}",
                    f"member name={name!r}")
        if info.compress_type != zipfile.ZIP_STORED:
            _refuse(path, "uncompressed members, as Executable.save writes them",
                    f"compress_type={info.compress_type} for member {name!r}")
        if info.file_size > limit or info.compress_size != info.file_size:
            _refuse(path, f"members no larger than the archive ({limit} bytes)",
                    f"file_size={info.file_size} for member {name!r}")
    return members


def _open_regular(path):
    """A binary file object of `path`, opened without blocking (a FIFO would wait for a
    writer) and refused unless it is a regular file."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        _refuse(path, "a regular file", f"file type {stat.filemode(os.stat(path).st_mode)}")
    return os.fdopen(fd, "rb")


def _read_members(path):
    try:
        with _open_regular(path) as file, zipfile.ZipFile(file) as archive:
            limit = archive.fp.seek(0, io.SEEK_END)
            _checked_members(path, archive, limit, expected=_MEMBERS)
            return (archive.read("executable.json"), archive.read("constants.npz"),
                    archive.read("checksum").decode())
    except FileNotFoundError:
        raise
    except (zipfile.BadZipFile, KeyError, OSError, EOFError, UnicodeDecodeError) as e:
        raise ExecutableFormatError(
            f"The file '{path}' is not a complete ipu_keras executable, expected a zip "
            f"with executable.json, constants.npz and checksum. Received: error {e!r}."
        ) from None


def _read_constants(path, arrays):
    """The constants of `constants.npz`, each array's declared size checked first."""
    try:
        with zipfile.ZipFile(io.BytesIO(arrays)) as archive:
            members = _checked_members(path, archive, len(arrays), pattern=r"c[0-9]+\.npy")
            constants = {}
            for info in members:
                with archive.open(info) as member:
                    constants[info.filename[:-4]] = _read_array(path, member, info)
            return constants
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as e:
        raise ExecutableFormatError(
            f"The constants of '{path}' are not a complete npz archive of arrays. "
            f"Received: error {e!r}. Recompile it."
        ) from None


def _read_array(path, member, info):
    version = np.lib.format.read_magic(member)
    read_header = _HEADER_READERS.get(version)
    if read_header is None:
        _refuse(path, "arrays in .npy format 1.0 or 2.0", f"version={version}")
    shape, fortran, dtype = read_header(member)
    if dtype.hasobject:
        _refuse(path, "arrays of plain dtypes", f"dtype={dtype} in {info.filename!r}")
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes > info.file_size:
        _refuse(path, f"arrays no larger than their member ({info.file_size} bytes)",
                f"shape={shape} of {dtype} in {info.filename!r}")
    data = member.read(nbytes)
    if len(data) != nbytes:
        _refuse(path, f"{nbytes} bytes of array data", f"{len(data)} bytes")
    array = np.frombuffer(data, dtype=dtype)
    order = "F" if fortran else "C"
    return array.reshape(shape, order=order).copy(order=order)


def _encoder():
    """(encode, constants): `encode(tree)` is `tree` as JSON data, each array in it moved
    to `constants` (`{"$array": key}`) and each tuple marked (`{"$tuple": [...]}`)."""
    constants = {}

    def enc(x):
        if isinstance(x, np.ndarray):
            key = f"c{len(constants)}"
            constants[key] = x
            return {"$array": key}
        if isinstance(x, np.generic):
            return {"$array": enc(np.asarray(x))["$array"], "scalar": True}
        if isinstance(x, tuple):
            return {"$tuple": [enc(v) for v in x]}
        if isinstance(x, list):
            return [enc(v) for v in x]
        if isinstance(x, dict):
            return {str(k): enc(v) for k, v in x.items()}
        return x

    return enc, constants


def _decoder(constants):
    """The inverse of `_encoder`'s `encode`, given the loaded `constants`."""
    def dec(x, depth=0):
        if depth > _MAX_DEPTH and isinstance(x, (dict, list)):
            raise Malformed(f"data nested at most {_MAX_DEPTH} deep", "deeper")
        depth += 1
        if isinstance(x, dict):
            if "$array" in x:
                if not isinstance(x["$array"], str) or x["$array"] not in constants:
                    raise Malformed("arrays that constants.npz holds",
                                    f"{x['$array']!r:.80}")
                value = constants[x["$array"]]
                return value[()] if x.get("scalar") else value
            if "$tuple" in x:
                if not isinstance(x["$tuple"], list):
                    raise Malformed("a list under $tuple", f"{x['$tuple']!r:.80}")
                return tuple(dec(v, depth) for v in x["$tuple"])
            return {k: dec(v, depth) for k, v in x.items()}
        if isinstance(x, list):
            return [dec(v, depth) for v in x]
        return x

    return dec


__all__ = ["CYCLE_KINDS", "FORMAT_VERSION", "Executable"]
