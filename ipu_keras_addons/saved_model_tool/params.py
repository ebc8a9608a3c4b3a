"""The options of `convert ipu`: defaults, `--config_file`, validation.

Precedence (as in the original's `IpuConversionParams`): the command line's values are
read first, then `--config_file` is applied over them, so **a key in the config file
overrides the same option on the command line**. Unlike the original, which silently
skipped a config entry of the wrong JSON type, such an entry is an error here, and so is
malformed JSON (with its line and column); unknown keys are logged and ignored.
JSON-valued options (`--gelu_replacement`, `--embedded_runtime_save_config`,
`--pipeline_cfg`) accept a JSON string on the command line; `--manual_sharding` a
Python/JSON literal list of lists of regular expressions.
"""
import ast
import dataclasses
import json
import logging

from ipu_keras.errors import ConversionConfigError

logger = logging.getLogger("ipu_keras")

PARTIAL_TYPES = ("float", "half")
PRECISION_MODES = ("FP16", "FP32")
GELU_KEYS = ("nodes", "node_as_gelu_input", "node_use_gelu_output")
EMBEDDED_KEYS = ("embedded_runtime_exec_cachedir", "runtime_api_timeout_us")
CONVERTERS = {"auto": (), "manual": ("manual_pipeline_config", "device_info"),
              "load": ("solution_path",)}


@dataclasses.dataclass
class ConversionParams:
    """Every option of `convert ipu`, with the original's defaults."""

    excluded_nodes: list = dataclasses.field(default_factory=list)
    num_ipus: int = 1
    matmul_amp: float = 0.6
    conv_amp: float = 0.6
    matmul_partial_type: str = "float"
    conv_partial_type: str = "float"
    batch_size: int = 1
    batch_per_step: int = 0
    precision_mode: str = None
    gelu_replacement: dict = None
    no_ipu_placement: bool = False
    int64_to_int32_conversion: bool = False
    precision_conversion_excluded_nodes: list = dataclasses.field(default_factory=list)
    remove_excluded_nodes: bool = False
    merge_subgraphs: bool = False
    manual_sharding: list = None
    embedded_runtime_save_config: dict = None
    pipeline_cfg: dict = None

    def to_dict(self):
        return dataclasses.asdict(self)


_TYPES = {f.name: f.type for f in dataclasses.fields(ConversionParams)}
_JSON_TYPES = {int: int, float: (int, float), str: str, bool: bool, list: list, dict: dict}


def parse_json(text, option):
    """Parses JSON `text` of `option`, with a designed error giving line and column."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ConversionConfigError(
            f"{option} expected valid JSON. Received: an error at line {e.lineno} column "
            f"{e.colno}: {e.msg}. Fix the JSON (comments and trailing commas are not "
            "allowed).") from None


def parse_sharding(text):
    """`--manual_sharding`: a literal list of lists of regexes, e.g. [["^a"], ["^b"]]."""
    try:
        return ast.literal_eval(text) if isinstance(text, str) else text
    except (ValueError, SyntaxError) as e:
        raise ConversionConfigError(
            "--manual_sharding expected a list of lists of regular expressions, one list per "
            f"IPU, such as '[[\"^dense\"], [\"^dense_1\"]]'. Received: {text!r} ({e}).") from None


def read_json_file(path, option):
    """The JSON value in file `path` of `option`; designed errors for a missing or
    malformed file (with line and column)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise ConversionConfigError(
            f"{option} expected a readable JSON file. Received: {path!r} ({e.strerror}).") \
            from None
    return parse_json(text, f"{option} '{path}'")


def load_config_file(path):
    """The dict of options in the JSON file `path`."""
    config = read_json_file(path, "--config_file")
    if not isinstance(config, dict):
        raise ConversionConfigError(
            f"--config_file expected a JSON object of options. Received: a JSON "
            f"{type(config).__name__} in '{path}'.")
    return config


def make_params(values, config_file=None):
    """`ConversionParams` from command-line `values` (a dict), then the config file over them."""
    params = ConversionParams(**{k: v for k, v in values.items()
                                 if k in _TYPES and v is not None})
    if config_file:
        for key, value in load_config_file(config_file).items():
            if key not in _TYPES:
                logger.warning("--config_file: unknown option '%s' ignored.", key)
                continue
            kind = _TYPES[key]
            if value is not None and (not isinstance(value, _JSON_TYPES[kind]) or (
                    kind is not bool and isinstance(value, bool))):
                raise ConversionConfigError(
                    f"--config_file option '{key}' expected a JSON {kind.__name__}. Received: "
                    f"{key}={value!r}.")
            setattr(params, key, value)
    validate(params)
    return params


def validate(params):
    """Checks the options together; raises ConversionConfigError. Normalises in place."""
    p = params
    _check(isinstance(p.num_ipus, int) and p.num_ipus > 0, "num_ipus", p.num_ipus,
           "a positive integer")
    _check(isinstance(p.batch_size, int) and p.batch_size > 0, "batch_size", p.batch_size,
           "a positive integer")
    _check(isinstance(p.batch_per_step, int) and p.batch_per_step >= 0, "batch_per_step",
           p.batch_per_step, "a non-negative integer")
    for name in ("matmul_amp", "conv_amp"):
        value = float(getattr(p, name))
        _check(0.0 < value <= 1.0, name, value, "a number in (0, 1]")
        setattr(p, name, value)
    for name in ("matmul_partial_type", "conv_partial_type"):
        _check(getattr(p, name) in PARTIAL_TYPES, name, getattr(p, name),
               f"one of {PARTIAL_TYPES}")
    _check(p.precision_mode in (None,) + PRECISION_MODES, "precision_mode", p.precision_mode,
           f"one of {PRECISION_MODES}")
    for name in ("excluded_nodes", "precision_conversion_excluded_nodes"):
        _check(_str_list(getattr(p, name)), name, getattr(p, name), "a list of regexes")
    if p.gelu_replacement is not None:
        _check(isinstance(p.gelu_replacement, dict) and all(
            _str_list(p.gelu_replacement.get(k)) for k in GELU_KEYS), "gelu_replacement",
            p.gelu_replacement, f"a dict with the regex lists {GELU_KEYS}")
    if p.manual_sharding is not None:
        _check(isinstance(p.manual_sharding, list) and all(
            _str_list(r) for r in p.manual_sharding) and len(p.manual_sharding) == p.num_ipus,
            "manual_sharding", p.manual_sharding,
            f"a list of {p.num_ipus} regex lists, one per IPU (num_ipus={p.num_ipus})")
    _validate_embedded(p)
    _validate_pipeline(p)


def _validate_embedded(p):
    config = p.embedded_runtime_save_config
    if config is None:
        return
    _check(isinstance(config, dict) and all(k in config for k in EMBEDDED_KEYS),
           "embedded_runtime_save_config", config, f"a dict with the keys {EMBEDDED_KEYS}")
    _check(not p.merge_subgraphs, "merge_subgraphs", p.merge_subgraphs,
           "False with the embedded runtime")
    _check(p.int64_to_int32_conversion, "int64_to_int32_conversion",
           p.int64_to_int32_conversion, "True with the embedded runtime (the IPU has no int64)")
    if p.batch_per_step == 0:
        p.batch_per_step = 1  # the embedded runtime always loops, at least once


def _validate_pipeline(p):
    cfg = p.pipeline_cfg
    if cfg is None:
        return
    _check(isinstance(cfg, dict) and cfg.get("converter") in CONVERTERS, "pipeline_cfg", cfg,
           f"a dict whose 'converter' is one of {sorted(CONVERTERS)}")
    _check(p.embedded_runtime_save_config is not None, "pipeline_cfg", cfg,
           "to come with --embedded_runtime_save_config (a pipeline runs in the embedded "
           "runtime)")
    for key in CONVERTERS[cfg["converter"]]:
        _check(key in cfg, "pipeline_cfg", cfg, f"the key '{key}' for converter "
               f"'{cfg['converter']}'")
    if cfg["converter"] == "manual":
        stages, devices = cfg["manual_pipeline_config"], cfg["device_info"]
        _check(isinstance(stages, list) and all(_str_list(s) for s in stages),
               "manual_pipeline_config", stages, "a list of regex lists, one per stage")
        _check(isinstance(devices, list) and len(devices) == len(stages) and all(
            isinstance(d, int) and 0 <= d < p.num_ipus for d in devices), "device_info",
            devices, f"one IPU index below num_ipus={p.num_ipus} per stage ({len(stages)})")


def _str_list(value):
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _check(ok, name, value, expected):
    if not ok:
        raise ConversionConfigError(
            f"convert ipu option '{name}' expected {expected}. Received: {name}={value!r}.")
