"""The `ipu-keras` command: `demo`, `ops`, `report DIR` and `--version`.

It parses arguments and hands over: `demo` to `ipu_keras.demo.run_demo`, `ops` to
`ipu_keras.supported_ops`, `report` to `ipu_keras.reports.summary`. TensorFlow is
imported only by the subcommands that need it, so `--version`, `--help` and `report`
answer at once.
"""
import argparse
import os
import sys

from ipu_keras.version import __version__


def _positive_int(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer. Received: {text}")
    return value


def _parser():
    parser = argparse.ArgumentParser(
        prog="ipu-keras", description="Train Keras models on a simulated Graphcore IPU.")
    parser.add_argument("--version", action="version", version=f"ipu-keras {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo = commands.add_parser(
        "demo", help="train the IPU tutorial's model on the simulated IPU and report "
                     "compile time, tile memory, device time and losses")
    demo.add_argument("--steps", type=_positive_int, default=200,
                      help="training steps in total (default: %(default)s)")
    demo.add_argument("--steps-per-execution", type=_positive_int, default=10,
                      help="steps per run of the compiled loop (default: %(default)s)")
    demo.add_argument("--batch-size", type=_positive_int, default=32,
                      help="samples per step (default: %(default)s)")
    commands.add_parser("ops", help="list the TensorFlow op types the tracer can import")
    report = commands.add_parser(
        "report", help="summarise a report directory (autoReport.directory or one "
                       "executable's): target, busiest tiles, largest tensors, cycles")
    report.add_argument("directory", help="directory holding report.json files")
    return parser


def _demo(args, parser):
    if args.steps % args.steps_per_execution:
        parser.error(f"--steps must be a multiple of --steps-per-execution. Received: "
                     f"steps={args.steps}, steps_per_execution={args.steps_per_execution}")
    from ipu_keras.demo import run_demo

    run_demo(steps=args.steps, steps_per_execution=args.steps_per_execution,
             batch_size=args.batch_size)


def _ops(args, parser):
    import ipu_keras

    ops = ipu_keras.supported_ops()
    for op in ops:
        print(op)
    print(f"{len(ops)} TensorFlow op types supported")


def _report(args, parser):
    from ipu_keras.reports import summary

    if not os.path.isdir(args.directory):
        parser.error(f"report expected a directory. Received: {args.directory!r}")
    paths = summary.find_reports(args.directory)
    if not paths:
        parser.error(f"no report.json in '{args.directory}' or its sub-directories; write "
                     "reports with POPLAR_ENGINE_OPTIONS='{\"autoReport.all\": \"true\", "
                     "\"autoReport.directory\": \"DIR\"}' or "
                     "ipu_keras.profiling.enable_reports(DIR).")
    for i, path in enumerate(paths):
        if i:
            print()
        print(f"== {os.path.dirname(path)}")
        print(summary.summarise(summary.load(path)))


_COMMANDS = {"demo": _demo, "ops": _ops, "report": _report}


def main(argv=None):
    """Runs the `ipu-keras` command line.

    Args:
        argv: The arguments, without the program name; `sys.argv[1:]` if None.

    Returns:
        int: The exit status, 0 on success. Usage errors exit with status 2
        (through `SystemExit`, as argparse does).
    """
    # Quiet TensorFlow's C++ start-up logging; must be set before TensorFlow loads.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    parser = _parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    _COMMANDS[args.command](args, parser)
    return 0


if __name__ == "__main__":
    sys.exit(main())
