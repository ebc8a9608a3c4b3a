"""The catalogue's items run in a process of their own, beside the rest of the suite.

The items are the suite's largest single cost (about three minutes of both cores, most
of it TensorFlow tracing Keras' steps on both sides). When the session starts running
tests, the items it selected start in `python -m ipu_keras._src.conformance --json` (itself
`IPU_KERAS_CONFORMANCE_WORKERS` processes, default 2), and their cases move to the end
of the run: the other tests run meanwhile, and each item's case reads its result from
the `catalogue_results` fixture, waiting for the process if it has not finished.
The process imports the same `ipu_keras` as this one (its directory leads PYTHONPATH).
"""
import dataclasses
import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import tempfile

import pytest

WORKERS = int(os.environ.get("IPU_KERAS_CONFORMANCE_WORKERS", min(2, os.cpu_count() or 1)))
_RUN = pytest.StashKey()


def _is_item_case(item):
    return item.path.name == "test_catalogue.py" and getattr(
        item, "originalname", "") == "test_item_matches_tensorflow"


def pytest_collection_modifyitems(session, config, items):
    cases = [item for item in items if _is_item_case(item)]
    if cases:
        items[:] = [item for item in items if not _is_item_case(item)] + cases


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session):
    names = [item.callspec.params["name"] for item in session.items if _is_item_case(item)]
    if names and not session.config.option.collectonly:
        session.config.stash[_RUN] = CatalogueRun(names, WORKERS)


def pytest_unconfigure(config):
    run = config.stash.get(_RUN, None)
    if run is not None:
        run.stop()


@pytest.fixture(scope="session")
def catalogue_results(request):
    """`{name: Result}` of the items this session selected."""
    run = request.config.stash.get(_RUN, None)
    if run is None:   # not started by the hook (a plugin ran the loop): run them now
        names = [item.callspec.params["name"] for item in request.session.items
                 if _is_item_case(item)]
        run = request.config.stash[_RUN] = CatalogueRun(names, WORKERS)
    return run.results()


class CatalogueRun:
    """`python -m ipu_keras._src.conformance --json` on `names`, its output in a file."""

    def __init__(self, names, workers):
        self.names = list(names)
        self._results = None
        self._out, self._err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
        package = pathlib.Path(importlib.util.find_spec("ipu_keras").origin).parent
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(package.parent)] + [p for p in [env.get("PYTHONPATH")] if p])
        command = [sys.executable, "-m", "ipu_keras._src.conformance", "--json", "-j", str(workers)]
        for name in self.names:
            command += ["--name", name]
        self.process = subprocess.Popen(command, stdout=self._out, stderr=self._err, env=env,
                                        cwd=package.parent)

    def results(self):
        if self._results is None:
            code = self.process.wait()
            from ipu_keras._src.conformance.runner import Result

            self._out.seek(0)
            results = [Result(**json.loads(line)) for line in self._out if line.strip()]
            self._results = {result.name: result for result in results}
            if code or set(self._results) != set(self.names):
                self._err.seek(0)
                tail = self._err.read().decode(errors="replace")[-3000:]
                raise RuntimeError(f"the catalogue process exited with {code} after "
                                   f"{len(results)} of {len(self.names)} items:\n{tail}")
        return self._results

    def stop(self):
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self._out.close()
        self._err.close()
