"""The Keras catalogue, item by item: what must train on the simulated IPU exactly as
TensorFlow trains it on the CPU. Each section is a function returning its items.
"""
import keras
from keras import layers as L

from ipu_keras.conformance.item import Item, class_data, regression_data, token_data


def _dense_head(units=3):
    return lambda h: L.Dense(units)(L.Flatten()(h) if len(h.shape) > 2 else h)


def _on(shape, body, name, group, **kwargs):
    """An item whose model is `body(inputs)` followed by a small dense regression head."""
    head = kwargs.pop("head", _dense_head())
    return Item(name, group, lambda x: head(body(x)),
                lambda: regression_data(shape, (3,)), shape, **kwargs)


def core():
    return [
        _on((6,), lambda x: L.Dense(5, activation="relu")(x), "Dense", "core"),
        _on((4, 6), lambda x: L.EinsumDense("abc,cd->abd", (4, 5))(x), "EinsumDense", "core"),
    ]


def activations():
    names = ["relu", "relu6", "leaky_relu", "elu", "selu", "gelu", "silu", "swish",
             "softplus", "softsign", "sigmoid", "hard_sigmoid", "hard_silu", "tanh",
             "softmax", "log_softmax", "mish", "exponential", "linear"]
    items = [_on((6,), lambda x, a=a: L.Dense(5, activation=a)(x), f"activation {a}",
                 "activations") for a in names]
    items.append(_on((6,), lambda x: L.Dense(5, activation=lambda t: keras.activations.gelu(
        t, approximate=True))(x), "activation gelu (approximate)", "activations"))
    return items


def reshaping():
    return [
        _on((2, 3, 4), lambda x: L.Reshape((6, 4))(x), "Reshape", "reshaping"),
        _on((2, 3, 4), lambda x: L.Permute((2, 1, 3))(x), "Permute", "reshaping"),
        _on((6,), lambda x: L.RepeatVector(3)(x), "RepeatVector", "reshaping"),
        _on((8, 3), lambda x: L.Cropping1D((1, 2))(x), "Cropping1D", "reshaping"),
        _on((8, 3), lambda x: L.ZeroPadding1D(2)(x), "ZeroPadding1D", "reshaping"),
        _on((8, 3), lambda x: L.UpSampling1D(2)(x), "UpSampling1D", "reshaping"),
        _on((6, 6, 2), lambda x: L.Cropping2D(((1, 0), (2, 1)))(x), "Cropping2D", "reshaping"),
        _on((5, 5, 2), lambda x: L.ZeroPadding2D((1, 2))(x), "ZeroPadding2D", "reshaping"),
        _on((3, 3, 2), lambda x: L.UpSampling2D(2)(x), "UpSampling2D", "reshaping"),
    ]


def _merge(layer_class, name):
    def body(x):
        a, b = L.Dense(4)(x), L.Dense(4, activation="tanh")(x)
        return layer_class()([a, b])
    return _on((6,), body, name, "merging")


def merging():
    items = [_merge(cls, cls.__name__) for cls in (
        L.Add, L.Subtract, L.Multiply, L.Average, L.Maximum, L.Minimum, L.Concatenate)]
    items.append(_on((6,), lambda x: L.Dot(axes=1)([L.Dense(4)(x), L.Dense(4)(x)]), "Dot",
                     "merging"))
    return items


def _classifier(loss, name, from_logits=False, **kwargs):
    activation = None if from_logits else "softmax"
    return Item(name, "losses", lambda x: L.Dense(4, activation=activation)(x),
                lambda: class_data((6,)), (6,), loss=loss, **kwargs)


def losses():
    regression = ["mean_squared_error", "mean_absolute_error",
                  "mean_absolute_percentage_error", "mean_squared_logarithmic_error",
                  "huber", "log_cosh", "cosine_similarity"]
    items = [_on((6,), lambda x: L.Dense(3, activation="softplus")(x), f"loss {n}", "losses",
                 loss=n, head=lambda h: h) for n in regression]
    items += [
        _classifier("sparse_categorical_crossentropy", "loss sparse_categorical_crossentropy"),
        _classifier(keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                    "loss sparse_categorical_crossentropy (from logits)", from_logits=True),
    ]
    return items


def metrics():
    def classify(metric_factory, name):
        return Item(name, "metrics", lambda x: L.Dense(4, activation="softmax")(x),
                    lambda: class_data((6,)), (6,), loss="sparse_categorical_crossentropy",
                    metrics=metric_factory)

    return [
        classify(lambda: ["accuracy"], "metric accuracy"),
        classify(lambda: [keras.metrics.SparseTopKCategoricalAccuracy(k=2)],
                 "metric sparse top-k accuracy"),
        _on((6,), lambda x: L.Dense(3)(x), "metric mean absolute error", "metrics",
            metrics=lambda: ["mae", "mse"], head=lambda h: h),
    ]


def optimizers():
    names = {
        "SGD": lambda: keras.optimizers.SGD(0.05),
        "SGD momentum nesterov": lambda: keras.optimizers.SGD(0.05, momentum=0.9,
                                                              nesterov=True),
        "Adam": lambda: keras.optimizers.Adam(0.01),
        "Adam amsgrad": lambda: keras.optimizers.Adam(0.01, amsgrad=True),
        "AdamW": lambda: keras.optimizers.AdamW(0.01),
        "Adamax": lambda: keras.optimizers.Adamax(0.01),
        "Nadam": lambda: keras.optimizers.Nadam(0.01),
        "RMSprop centered": lambda: keras.optimizers.RMSprop(0.01, centered=True),
        "Adagrad": lambda: keras.optimizers.Adagrad(0.05),
        "Adadelta": lambda: keras.optimizers.Adadelta(0.5),
        "Adafactor": lambda: keras.optimizers.Adafactor(0.05),
        "Ftrl": lambda: keras.optimizers.Ftrl(0.05),
        "Lion": lambda: keras.optimizers.Lion(0.01),
        "Lamb": lambda: keras.optimizers.Lamb(0.01),
        "SGD clipnorm": lambda: keras.optimizers.SGD(0.05, clipnorm=0.1),
        "SGD clipvalue": lambda: keras.optimizers.SGD(0.05, clipvalue=0.01),
        "SGD global_clipnorm": lambda: keras.optimizers.SGD(0.05, global_clipnorm=0.1),
        "Adam use_ema": lambda: keras.optimizers.Adam(0.01, use_ema=True),
        "SGD gradient_accumulation_steps": lambda: keras.optimizers.SGD(
            0.05, gradient_accumulation_steps=2),
        "SGD exponential decay": lambda: keras.optimizers.SGD(
            keras.optimizers.schedules.ExponentialDecay(0.05, 2, 0.5)),
        "SGD cosine decay": lambda: keras.optimizers.SGD(
            keras.optimizers.schedules.CosineDecay(0.05, 4)),
        "SGD piecewise constant": lambda: keras.optimizers.SGD(
            keras.optimizers.schedules.PiecewiseConstantDecay([1, 2], [0.05, 0.02, 0.01])),
        "SGD polynomial decay": lambda: keras.optimizers.SGD(
            keras.optimizers.schedules.PolynomialDecay(0.05, 4)),
        "SGD inverse time decay": lambda: keras.optimizers.SGD(
            keras.optimizers.schedules.InverseTimeDecay(0.05, 2, 0.5)),
    }
    return [_on((6,), lambda x: L.Dense(4, activation="tanh")(x), f"optimizer {n}",
                "optimizers", optimizer=f) for n, f in names.items()]


def embedding():
    return [Item("Embedding", "attention and embedding",
                 lambda x: L.Dense(2, activation="softmax")(L.GlobalAveragePooling1D()(
                     L.Embedding(20, 4)(x))),
                 lambda: token_data(5), (5,), input_dtype="int32",
                 loss="sparse_categorical_crossentropy")]


SECTIONS = (core, activations, reshaping, merging, losses, metrics, optimizers, embedding)


def catalogue():
    """Every item, section by section."""
    return [item for section in SECTIONS for item in section()]
