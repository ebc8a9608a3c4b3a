"""The cycle and memory models against published figures (`test_published.py`,
`test_memory_fit.py`)."""
import pytest


def case_params(cases):
    """pytest params of a table of (case, workload) rows, named by the case, the slow ones
    marked."""
    return [pytest.param(c, w, id=c.name, marks=[pytest.mark.slow] if c.slow else [])
            for c, w in cases]


def mnist_cnn(keras):
    """Graphcore's Keras tutorial CNN (tutorials/tensorflow2/keras): conv 32, pool, conv
    64, pool, flatten, dropout, dense 10 with softmax, on 28x28x1 images."""
    return keras.Sequential([
        keras.Input((28, 28, 1)),
        keras.layers.Conv2D(32, 3, activation="relu"),
        keras.layers.MaxPooling2D(2),
        keras.layers.Conv2D(64, 3, activation="relu"),
        keras.layers.MaxPooling2D(2),
        keras.layers.Flatten(),
        keras.layers.Dropout(0.5),
        keras.layers.Dense(10, activation="softmax"),
    ])
