"""Test-wide setup. Runs before any test module, so before anything imports TensorFlow."""
import os

# Silence TensorFlow's C++ start-up logging; must be set before TensorFlow is imported.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
