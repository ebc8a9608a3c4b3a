"""The IPU Keras optimizers of IPU TensorFlow Addons."""
__all__ = []
