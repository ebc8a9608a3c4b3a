"""Which Keras layers a traced function calls, so errors can name them.

Keras runs each layer call under a name scope made from the layer's name (made
unique with a `_N` suffix). While tracing, `recording_layer_names()` notes the name
of every layer called, and the importer matches node name scopes against them.
"""
import contextlib


@contextlib.contextmanager
def recording_layer_names(names):
    try:
        from keras.src.layers.layer import Layer
    except ImportError:  # Keras is optional for plain TensorFlow functions
        yield names
        return
    original = Layer.__call__

    def call(self, *args, **kwargs):
        names.add(self.name)
        return original(self, *args, **kwargs)

    Layer.__call__ = call
    try:
        yield names
    finally:
        Layer.__call__ = original
