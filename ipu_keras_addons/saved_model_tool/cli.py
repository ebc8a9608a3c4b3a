"""The `ipu_saved_model_cli` command: TensorFlow's `saved_model_cli` grammar for the IPU.

`show --dir D [--all] [--tag_set T] [--signature_def K]`, `run --dir D --tag_set T
--signature_def K (--inputs | --input_exprs | --input_examples) [--outdir O] [--overwrite]`
with the IPU options, and `convert --dir D --output_dir O --tag_set T ipu [options]`.
It only parses and prints; the work is in this package's modules. Designed errors
(`ipu_keras.errors.IPUError`) are printed as `error: ...` with exit status 1.
"""
import argparse
import os
import sys

_IPU_HELP = {
    "num_ipus": "number of IPUs of the simulated device (default: %(default)s)",
    "matmul_amp": "available memory proportion of matmuls, in (0, 1] (default: %(default)s)",
    "conv_amp": "available memory proportion of convolutions (default: %(default)s)",
    "matmul_partial_type": "partials type of matmuls: float or half (default: %(default)s)",
    "conv_partial_type": "partials type of convolutions: float or half (default: "
                         "%(default)s)",
}


def _num_ipus(text):
    """--num_ipus: a power of two, as the device takes (1, 2, 4, ...)."""
    try:
        count = int(text)
    except ValueError:
        count = 0
    if count < 1 or count & (count - 1):
        raise argparse.ArgumentTypeError(
            f"expected a power of two (1, 2, 4, 8, ...), the IPU counts a device has. "
            f"Received: {text!r}")
    return count


def _add_ipu_options(parser):
    parser.add_argument("--num_ipus", type=_num_ipus, default=1, help=_IPU_HELP["num_ipus"])
    parser.add_argument("--matmul_amp", type=float, default=0.6, help=_IPU_HELP["matmul_amp"])
    parser.add_argument("--conv_amp", type=float, default=0.6, help=_IPU_HELP["conv_amp"])
    parser.add_argument("--matmul_partial_type", default="float", choices=("float", "half"),
                        help=_IPU_HELP["matmul_partial_type"])
    parser.add_argument("--conv_partial_type", default="float", choices=("float", "half"),
                        help=_IPU_HELP["conv_partial_type"])


def _parser():
    parser = argparse.ArgumentParser(
        prog="ipu_saved_model_cli",
        description="saved_model_cli for the simulated IPU: show, run and convert SavedModels")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    show = commands.add_parser("show", help="show the tag sets, signatures, inputs, outputs")
    show.add_argument("--dir", required=True, help="directory holding the SavedModel")
    show.add_argument("--all", action="store_true", help="show everything")
    show.add_argument("--tag_set", help="comma-separated tags of a MetaGraphDef")
    show.add_argument("--signature_def", help="key of a SignatureDef")
    run = commands.add_parser("run", help="run a signature on the simulated IPU")
    run.add_argument("--dir", required=True)
    run.add_argument("--tag_set", required=True)
    run.add_argument("--signature_def", required=True)
    run.add_argument("--inputs", default="", help="'key=file.npy;key2=file.npz[name]' "
                     "(.npy/.npz only: pickle files are refused)")
    run.add_argument("--input_exprs", default="", help="'key=<expression>;...': Python literals, "
                     "np.ones/zeros/full/arange/linspace/eye/array/random.*, numpy dtypes, "
                     ".astype/.reshape; read as data, never run")
    run.add_argument("--input_examples", default="", help="'key=[{feature: [values]}];...'")
    run.add_argument("--outdir", help="save each output as OUTDIR/<key>.npy")
    run.add_argument("--overwrite", action="store_true", help="replace existing output files")
    run.add_argument("--tf_debug", action="store_true", help="accepted; has no effect")
    run.add_argument("--worker", help="accepted; has no effect (the device is simulated)")
    run.add_argument("--init_ipu", action="store_true",
                     help="configure the simulated IPU system from the options below first "
                          "(they are used for compiling either way)")
    _add_ipu_options(run)
    convert = commands.add_parser("convert", help="convert a SavedModel for the IPU")
    convert.add_argument("--dir", required=True)
    convert.add_argument("--output_dir", required=True)
    convert.add_argument("--tag_set", required=True)
    convert.add_argument("--overwrite", action="store_true",
                         help="replace a non-empty --output_dir")
    _add_convert_ipu(convert.add_subparsers(dest="method", required=True, metavar="METHOD"))
    return parser


def _add_convert_ipu(methods):
    ipu = methods.add_parser("ipu", help="convert with IPU integration")
    ipu.add_argument("--excluded_nodes", nargs="+", default=[], help="regexes of host nodes")
    _add_ipu_options(ipu)
    ipu.add_argument("--batch_size", type=int, default=1, help="micro-batch size")
    ipu.add_argument("--batch_per_step", type=int, default=0,
                     help="micro-batches per run of the embedded executable (0: 1)")
    ipu.add_argument("--precision_mode", choices=("FP16", "FP32"), help="precision of the model")
    ipu.add_argument("--gelu_replacement", help="JSON: GELU replacement rules")
    ipu.add_argument("--no_ipu_placement", action="store_true", help="place no node on the IPU")
    ipu.add_argument("--int64_to_int32_conversion", action="store_true")
    ipu.add_argument("--precision_conversion_excluded_nodes", nargs="+", default=[])
    ipu.add_argument("--remove_excluded_nodes", action="store_true")
    ipu.add_argument("--merge_subgraphs", action="store_true")
    ipu.add_argument("--manual_sharding", help="list of regex lists, one per IPU")
    ipu.add_argument("--embedded_runtime_save_config", help="JSON: embedded runtime config")
    ipu.add_argument("--pipeline_cfg", help="JSON: pipeline configuration")
    ipu.add_argument("--config_file", help="JSON file of options; its values override the "
                     "command line's")


def _show(args):
    from ipu_keras_addons.saved_model_tool import show

    if args.all:
        show.show_all(args.dir)
    elif args.tag_set is None:
        show.show_tag_sets(args.dir)
    elif args.signature_def is None:
        show.show_signature_keys(args.dir, args.tag_set)
    else:
        show.show_signature(args.dir, args.tag_set, args.signature_def)


def _run(args):
    from ipu_keras_addons.saved_model_tool import inputs, run, runner

    feeds = inputs.parse_inputs(args.inputs, args.input_exprs, args.input_examples)
    options = runner.IPUOptions(args.num_ipus, args.matmul_amp, args.conv_amp,
                                args.matmul_partial_type, args.conv_partial_type)
    if args.init_ipu:  # as the original: configure the IPU system before running
        options.config().configure_ipu_system()
    result = run.run_saved_model(args.dir, args.tag_set, args.signature_def, feeds, options)
    paths = run.save_outputs(result.outputs, args.outdir, args.overwrite) if args.outdir else {}
    for key in sorted(result.outputs):
        print(f"Result for output key {key}:\n{result.outputs[key]}")
        if key in paths:
            print(f"Output {key} is saved to {paths[key]}")
    for line in result.summary_lines():
        print(line)


def _convert(args):
    from ipu_keras_addons.saved_model_tool import convert, params

    values = dict(vars(args))
    for name in ("gelu_replacement", "embedded_runtime_save_config", "pipeline_cfg"):
        if values.get(name) is not None:
            values[name] = params.parse_json(values[name], f"--{name}")
    if values.get("manual_sharding") is not None:
        values["manual_sharding"] = params.parse_sharding(values["manual_sharding"])
    conversion = params.make_params(values, args.config_file)
    report = convert.convert(args.dir, args.output_dir, args.tag_set, conversion,
                             args.overwrite)
    print(f"Converted SavedModel written to {report['output_dir']} ({report['nodes']} nodes "
          f"for the IPU, {len(report['excluded'])} kept on the host)")
    for key in ("precision", "placement", "solution", "executable", "conversion_params"):
        if key in report:
            print(f"  {key}: {report[key]}")
    for attempt in report.get("auto_search", []):
        print(f"  auto search: {attempt['stages']} stages, cycles per stage "
              f"{attempt['stage_cycles']}, bytes per stage {attempt['stage_bytes']}")


_COMMANDS = {"show": _show, "run": _run, "convert": _convert}


def main(argv=None):
    """Runs `ipu_saved_model_cli`; returns the exit status (usage errors exit with 2)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    from ipu_keras.errors import IPUError

    try:
        _COMMANDS[args.command](args)
    except IPUError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
