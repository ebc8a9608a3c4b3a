"""Runs TensorFlow 1 scenarios as TensorFlow 1.15 ran them, in a process of their own.

`python v1_driver.py MODULE` imports `MODULE` (a `scenarios_*.py` file next to this
one), disables the v2 behaviour (v1 `TensorShape`s of `Dimension`s, reference variables
by default, v1 control flow, `DatasetV1`), calls each function named in its `SCENARIOS`
in a fresh default graph, and prints their JSON results on one `RESULT` line.
`drive(MODULE)` does that from a test. Graph mode never leaks into the test process.
"""
import importlib
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def drive(module):
    """Runs `module`'s scenarios in a subprocess; returns {scenario: result}."""
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(HERE))
    env["PYTHONPATH"] = os.pathsep.join([root, HERE, env.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, os.path.join(HERE, "v1_driver.py"), module],
                          capture_output=True, text=True, env=env, timeout=900, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stderr[-6000:]
    return json.loads(lines[-1][len("RESULT "):])


def _jsonable(value):
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def main(module):
    import tensorflow as tf  # noqa: PLC0415 - after the path is set

    tf.compat.v1.disable_v2_behavior()
    scenarios = importlib.import_module(module)
    results = {}
    for name in scenarios.SCENARIOS:
        with tf.Graph().as_default():
            results[name] = _jsonable(getattr(scenarios, name)())
    print("RESULT " + json.dumps(results))


if __name__ == "__main__":
    main(sys.argv[1])
