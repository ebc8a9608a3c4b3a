"""The `ipu-keras` command: `demo`, `ops`, `report DIR`, `run`, `tutorials`, `--version`.

It parses arguments and hands over: `demo` to `ipu_keras._src.demo.run_demo`, `ops` to
`ipu_keras.supported_ops`, `report` to `ipu_keras._src.reports.summary` (with `--trace`
to `reports.trace`, with `--compare` to `reports.compare`); `run` launches a
script as several MPI processes sharing the replicas (`ipu_keras.distributed`);
`tutorials` lists the tutorial notebooks or copies them to a folder. TensorFlow is
imported only by the subcommands that need it, so `--version`, `--help` and `report`
answer at once.
"""
import argparse
import importlib.util
import os
import pathlib
import shutil
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
    report.add_argument("--trace", metavar="FILE",
                        help="write the execution trace as Chrome trace events (.json, or "
                             ".json.gz compressed) for Perfetto or chrome://tracing; with "
                             "several reports, one file each (FILE's name + the report's)")
    report.add_argument("--compare", metavar="DIR",
                        help="compare with the reports in DIR: cycles per layer and per op, "
                             "memory, side by side with the differences")
    run = commands.add_parser(
        "run", help="launch a training script as several instances (processes) sharing "
                    "the replicas, through MPI, as poprun does")
    run.add_argument("--num-instances", type=_positive_int, required=True,
                     help="processes to launch")
    run.add_argument("--num-replicas", type=_positive_int, required=True,
                     help="replicas in all (a multiple of --num-instances)")
    run.add_argument("--mpiexec", default=None, help="the MPI launcher (default: mpiexec "
                     "beside this Python, else on PATH)")
    run.add_argument("program", nargs=argparse.REMAINDER,
                     help="-- followed by the command, e.g. -- python train.py")
    tutorials = commands.add_parser(
        "tutorials", help="list the tutorial notebooks, or copy them to a folder")
    tutorials.add_argument("--copy", metavar="DIR",
                           help="copy the notebooks (.ipynb and their .py twins) into DIR")
    return parser


def _demo(args, parser):
    if args.steps % args.steps_per_execution:
        parser.error(f"--steps must be a multiple of --steps-per-execution. Received: "
                     f"steps={args.steps}, steps_per_execution={args.steps_per_execution}")
    from ipu_keras._src.demo import run_demo

    run_demo(steps=args.steps, steps_per_execution=args.steps_per_execution,
             batch_size=args.batch_size)


def _ops(args, parser):
    import ipu_keras

    ops = ipu_keras.supported_ops()
    for op in ops:
        print(op)
    print(f"{len(ops)} TensorFlow op types supported")


def _report_paths(directory, parser):
    from ipu_keras._src.reports import summary

    if not os.path.isdir(directory):
        parser.error(f"report expected a directory. Received: {directory!r}")
    paths = summary.find_reports(directory)
    if not paths:
        parser.error(f"no report.json in '{directory}' or its sub-directories; write "
                     "reports with POPLAR_ENGINE_OPTIONS='{\"autoReport.all\": \"true\", "
                     "\"autoReport.directory\": \"DIR\"}' or "
                     "ipu_keras.profiling.enable_reports(DIR).")
    return paths


def _trace_paths(target, paths):
    """One output file per report: `target` itself for one report, else `target` with
    each report's directory name before the extension."""
    if len(paths) == 1:
        return [target]
    stem, ext = (target[:-8], ".json.gz") if target.endswith(".json.gz") else \
        os.path.splitext(target)
    return [f"{stem}_{os.path.basename(os.path.dirname(p))}{ext or '.json'}" for p in paths]


def _report(args, parser):
    from ipu_keras._src.reports import summary

    paths = _report_paths(args.directory, parser)
    if args.compare is not None:
        return _compare(args, parser, paths)
    if args.trace is not None:
        from ipu_keras._src.reports.trace import write_trace

        for path, target in zip(paths, _trace_paths(args.trace, paths)):
            try:
                write_trace(summary.load(path), target)
            except OSError as e:
                parser.error(f"--trace expected a writable file. Received: {target!r} ({e})")
            print(f"wrote the execution trace of {os.path.dirname(path)} to {target}")
        return
    for i, path in enumerate(paths):
        if i:
            print()
        print(f"== {os.path.dirname(path)}")
        print(summary.summarise(summary.load(path)))


def _compare(args, parser, paths):
    from ipu_keras._src.reports import compare, summary

    a = [summary.load(p) for p in paths]
    b = [summary.load(p) for p in _report_paths(args.compare, parser)]
    pairs = compare.pair_reports(a, b)
    if not pairs:
        parser.error(f"--compare found no report of the same executable in both directories. "
                     f"Received: {sorted(r['name'] for r in a)} and "
                     f"{sorted(r['name'] for r in b)}")
    for i, (ra, rb) in enumerate(pairs):
        if i:
            print()
        print(compare.compare_text(ra, rb))


def _run(args, parser):
    import subprocess

    from ipu_keras._src.runtime.process_group import NUM_REPLICAS_ENV

    program = args.program[1:] if args.program[:1] == ["--"] else args.program
    if not program:
        parser.error("run expected a command after --, e.g. -- python train.py")
    if args.num_replicas % args.num_instances:
        parser.error(f"--num-replicas must be a multiple of --num-instances. Received: "
                     f"num_replicas={args.num_replicas}, num_instances={args.num_instances}")
    beside = pathlib.Path(sys.executable).parent / "mpiexec"
    launcher = args.mpiexec or (str(beside) if beside.exists() else shutil.which("mpiexec"))
    if not launcher:
        parser.error("run expected an MPI launcher (mpiexec); install one with "
                     "`pip install mpi4py mpich` (the project's `distributed` extra: "
                     "`pip install \".[distributed]\"` in its clone)")
    env = dict(os.environ, **{NUM_REPLICAS_ENV: str(args.num_replicas)})
    sys.exit(subprocess.call([launcher, "-n", str(args.num_instances)] + program, env=env))


def tutorials_directory():
    """The folder holding the tutorials: `tutorials/` of a source checkout, else the
    installed package `ipu_keras_tutorials`; None if neither is there."""
    checkout = pathlib.Path(__file__).resolve().parents[2] / "tutorials"
    if any(checkout.glob("[0-9][0-9]_*.ipynb")):
        return checkout
    spec = importlib.util.find_spec("ipu_keras_tutorials")
    if spec is not None and spec.submodule_search_locations:
        return pathlib.Path(list(spec.submodule_search_locations)[0])
    return None


def _title(notebook_path):
    import json

    cells = json.loads(notebook_path.read_text(encoding="utf-8"))["cells"]
    first = "".join(cells[0]["source"]).splitlines()[0] if cells else ""
    return first.lstrip("# ").strip()


def _tutorials(args, parser):
    directory = tutorials_directory()
    if directory is None:
        parser.error("the tutorials are not installed with this copy of ipu-keras; they "
                     "are in the project's tutorials/ folder")
    notebooks = sorted(directory.glob("[0-9][0-9]_*.ipynb"))
    if args.copy:
        target = pathlib.Path(args.copy)
        target.mkdir(parents=True, exist_ok=True)
        for notebook in notebooks:
            for path in (notebook, notebook.with_suffix(".py")):
                if path.exists():
                    shutil.copy2(path, target / path.name)
        print(copied_message(len(notebooks), target, notebooks[0].with_suffix(".py").name
                             if notebooks else None))
        return
    for notebook in notebooks:
        print(f"{notebook.name:40s} {_title(notebook)}")
    print(f"{len(notebooks)} tutorials in {directory}; `ipu-keras tutorials --copy DIR` "
          "copies them")


def copied_message(count, target, first_script):
    """What to do with copied tutorials, with only what `pip install .` brings: each
    notebook's .py twin runs as a script; Jupyter is not a dependency, so it is named as
    something to install first."""
    run = f" Run one as a script: `python {target / first_script}`." if first_script else ""
    return (f"copied {count} tutorials to {target}.{run} To open the notebooks, install a "
            f"notebook app first (`pip install jupyterlab`), then `jupyter lab {target}`.")


_COMMANDS = {"demo": _demo, "ops": _ops, "report": _report, "run": _run,
             "tutorials": _tutorials}


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
