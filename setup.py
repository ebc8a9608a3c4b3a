"""Packaging for ipu_keras: `pip install .` (add `".[test]"` for the test tools)."""
import pathlib
import re

from setuptools import find_packages, setup

HERE = pathlib.Path(__file__).resolve().parent


def _version():
    # Read, don't import: importing the package would need its dependencies.
    text = (HERE / "ipu_keras" / "version.py").read_text(encoding="utf-8")
    match = re.search(r'^__version__\s*=\s*["\']([^"\']+)["\']', text, re.MULTILINE)
    if not match:
        raise RuntimeError("ipu_keras/version.py does not define __version__.")
    return match.group(1)


setup(
    name="ipu-keras",
    version=_version(),
    description="Train and run Keras models on a simulated Graphcore IPU.",
    long_description=(HERE / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    packages=find_packages(
        exclude=["tests", "tests.*", "bench", "bench.*", "tutorials", "tutorials.*"])
    + ["ipu_keras_tutorials"],
    # The notebooks of tutorials/ ship as the package ipu_keras_tutorials (found by
    # `ipu-keras tutorials`).
    package_dir={"ipu_keras_tutorials": "tutorials"},
    package_data={"ipu_keras_tutorials": ["*.ipynb", "*.py"],
                  # The script of the interactive report.html (reports/interactive.py).
                  "ipu_keras._src.reports": ["*.js"]},
    python_requires=">=3.10",
    install_requires=[
        # TensorFlow traces the functions and is the numerical oracle; the CPU-only
        # wheel is enough. It is not published for macOS, where `tensorflow` is.
        "tensorflow-cpu>=2.16; sys_platform != 'darwin'",
        "tensorflow>=2.16; sys_platform == 'darwin'",
        "keras>=3",
        "numpy",
        # Keeps numpy's BLAS single-threaded while the simulator runs (see runtime/session.py).
        "threadpoolctl>=3",
        # Draws the PNG plots of profile reports (imported only when a report is written).
        "matplotlib",
        # plotly.js, inlined into the interactive report.html (its JavaScript only: the
        # Python package is not imported).
        "plotly>=5",
        # The executable cache's lock while it evicts entries (compiler/cache.py).
        "filelock>=3.12",
        # Progress of tracing, compiling and the first execution, in a terminal or a
        # notebook (driver/progress.py).
        "tqdm>=4.66",
    ],
    extras_require={
        # Replicas across processes (ipu_keras.distributed, `ipu-keras run`): MPI for
        # Python and an MPI to run it on, both from PyPI.
        "distributed": ["mpi4py>=4", "mpich"],
        # hypothesis drives the randomized differential test (tests/fuzz); nbclient,
        # nbformat and ipykernel execute the tutorial notebooks (tests/tutorials); the
        # distributed extra runs the multi-process replication test; import-linter checks
        # that the layers only import downwards (.importlinter, tests/test_layers.py);
        # tensorboard lets tests/reports read what IPUTensorBoard writes.
        "test": ["pytest", "hypothesis", "nbclient", "nbformat", "ipykernel", "mpi4py>=4",
                 "mpich", "import-linter>=2.1", "tensorboard"],
        # TensorBoard for ipu_keras.keras.callbacks.IPUTensorBoard (and Keras' own
        # TensorBoard callback): tf.summary writes through it.
        "tensorboard": ["tensorboard"],
    },
    entry_points={
        "console_scripts": [
            "ipu-keras=ipu_keras._src.cli:main",
            "ipu_saved_model_cli=ipu_keras_addons.saved_model_tool.cli:main",
        ],
    },
    classifiers=[
        "Programming Language :: Python :: 3",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
)
