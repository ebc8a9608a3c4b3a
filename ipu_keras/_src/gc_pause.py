"""`collection_paused()`: Python's cyclic garbage collector off while a graph is built.

Tracing a Keras step and compiling it allocate millions of small objects (TensorFlow's
graph and ours) in a heap that already holds hundreds of thousands, and each of the
collector's full passes walks all of them: while tracing and compiling ResNet-50's
train step, its passes took a fifth of our import and compile time (2.57 -> 2.01 s, and
TensorFlow's own tracing 3.4 -> 3.2 s, `python bench/compile_speed.py`). Nothing cyclic
outlives a build but the graph itself, so the collector is off for its duration and
collects as usual once it is back on. Nested uses leave it to the outermost.
"""
import contextlib
import gc


@contextlib.contextmanager
def collection_paused():
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
