"""The IPU executable: plain data that the simulator interprets.

An `Executable` is programs (blocks of steps), the slots they use, the variables
and streams they touch, cost tables per block and the memory plan. It is saved as
one zip file holding `executable.json` and `constants.npz`, with a SHA-256 checksum
over both; loading never unpickles anything (`allow_pickle=False`) and refuses a
truncated or altered file with `ExecutableFormatError`.

Steps (lists, first element the kind):
  ["exec", op, in_slots, out_slots, params]
  ["read", var, out_slot]          ["write", var, mode, in_slot]
  ["infeed", feed, out_slots]      ["outfeed", feed, in_slots]
  ["while", carry_slots, cond_block, cond_in, cond_out, body_block, body_in, body_out,
   out_slots]
  ["if", pred_slot, in_slots, then_block, then_in, then_out, else_block, else_in,
   else_out, out_slots]
Block 0 is the main program; a block's sub-blocks have larger indices. `constants`
lists [slot, array] pairs the engine presets before running.
"""
import dataclasses
import hashlib
import io
import json
import zipfile

import numpy as np

from ipu_keras.errors import ExecutableFormatError

FORMAT_VERSION = 1
CYCLE_KINDS = ("compute", "exchange", "sync", "host_io")


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

    def save(self, path):
        payload, constants = _encode(dataclasses.asdict(self))
        body = json.dumps({"format": FORMAT_VERSION, "executable": payload}).encode()
        buffer = io.BytesIO()
        np.savez(buffer, **constants)
        arrays = buffer.getvalue()
        digest = hashlib.sha256(body + arrays).hexdigest()
        with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
            archive.writestr("executable.json", body)
            archive.writestr("constants.npz", arrays)
            archive.writestr("checksum", digest)

    @classmethod
    def load(cls, path):
        try:
            with zipfile.ZipFile(path) as archive:
                body = archive.read("executable.json")
                arrays = archive.read("constants.npz")
                digest = archive.read("checksum").decode()
        except (zipfile.BadZipFile, KeyError, OSError, EOFError) as e:
            raise ExecutableFormatError(
                f"The file '{path}' is not a complete ipu_keras executable, expected a zip "
                f"with executable.json, constants.npz and checksum. Received: error {e!r}."
            ) from None
        if hashlib.sha256(body + arrays).hexdigest() != digest:
            raise ExecutableFormatError(
                f"The executable '{path}' does not match its checksum: it was altered or "
                "damaged after it was written. Recompile it."
            )
        document = json.loads(body)
        if document.get("format") != FORMAT_VERSION:
            raise ExecutableFormatError(
                f"Executable format {FORMAT_VERSION} expected. Received: "
                f"format={document.get('format')!r}."
            )
        with np.load(io.BytesIO(arrays), allow_pickle=False) as npz:
            constants = {k: npz[k] for k in npz.files}
        return cls(**_decode(document["executable"], constants))


def _encode(tree):
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

    return enc(tree), constants


def _decode(tree, constants):
    def dec(x):
        if isinstance(x, dict):
            if "$array" in x:
                value = constants[x["$array"]]
                return value[()] if x.get("scalar") else value
            if "$tuple" in x:
                return tuple(dec(v) for v in x["$tuple"])
            return {k: dec(v) for k, v in x.items()}
        if isinstance(x, list):
            return [dec(v) for v in x]
        return x

    return dec(tree)
