"""Catalogue sections: losses, metrics, optimizers and mixed precision."""
import numpy as np
import keras
from keras import layers as L

from ipu_keras._src.conformance import tolerances as T
from ipu_keras._src.conformance.item import (
    Item, binary_data, class_data, on, onehot_data, positive_data, regression_data,
)
from ipu_keras.optimizers import ALSOptimizer

LOSSES, METRICS = "losses", "metrics"


def ctc_data(time_steps=6, features=3, label_length=3, classes=5, samples=32, seed=0):
    """Sequences and CTC label rows of classes 1.. (0 is the blank) padded with zeros."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((samples, time_steps, features)).astype(np.float32)
    y = rng.integers(1, classes, (samples, label_length)).astype(np.int32)
    y[np.arange(label_length) >= rng.integers(1, label_length + 1, samples)[:, None]] = 0
    return x, y


def _head(units, activation, data, loss, name, group=LOSSES, **kwargs):
    """An item: Dense(units, activation) on 6 features, trained on `data()` with `loss`."""
    return Item(name, group, lambda x: L.Dense(units, activation=activation)(x), data, (6,),
                loss=loss, **kwargs)


def _binary(loss, name, activation="sigmoid", **kwargs):
    return _head(1, activation, lambda: binary_data((6,)), loss, name, **kwargs)


def _categorical(loss, name, activation="softmax", **kwargs):
    return _head(4, activation, lambda: onehot_data((6,)), loss, name, **kwargs)


def _sparse(loss, name, activation="softmax", **kwargs):
    return _head(4, activation, lambda: class_data((6,)), loss, name, **kwargs)


def _regression(loss, name, activation="softplus", positive=False, **kwargs):
    data = positive_data if positive else regression_data
    return _head(3, activation, lambda: data((6,), (3,)), loss, name, **kwargs)


def losses():
    K = keras.losses
    return [
        _regression("mean_squared_error", "loss mean_squared_error"),
        _regression(K.MeanSquaredError(reduction="sum"), "loss MeanSquaredError (sum)"),
        _regression("mean_absolute_error", "loss mean_absolute_error"),
        _regression("mean_absolute_percentage_error", "loss mean_absolute_percentage_error",
                    positive=True),
        _regression("mean_squared_logarithmic_error", "loss mean_squared_logarithmic_error",
                    positive=True),
        _regression("huber", "loss huber", activation=None),
        _regression(K.Huber(delta=0.3), "loss Huber (delta 0.3)", activation=None),
        _regression("log_cosh", "loss log_cosh", activation=None),
        _regression("cosine_similarity", "loss cosine_similarity", activation=None),
        _regression("poisson", "loss poisson", positive=True),
        _regression("kl_divergence", "loss kl_divergence", activation="softmax", positive=True),
        _binary("binary_crossentropy", "loss binary_crossentropy"),
        _binary(K.BinaryCrossentropy(from_logits=True), "loss BinaryCrossentropy (logits)",
                activation=None),
        _binary(K.BinaryCrossentropy(label_smoothing=0.1),
                "loss BinaryCrossentropy (label smoothing)"),
        _binary(K.BinaryCrossentropy(from_logits=True, label_smoothing=0.2),
                "loss BinaryCrossentropy (logits, label smoothing)", activation=None),
        _binary("binary_focal_crossentropy", "loss binary_focal_crossentropy"),
        _binary(K.BinaryFocalCrossentropy(apply_class_balancing=True, from_logits=True,
                                          label_smoothing=0.1),
                "loss BinaryFocalCrossentropy (logits, balanced, smoothing)", activation=None),
        _categorical("categorical_crossentropy", "loss categorical_crossentropy"),
        _categorical(K.CategoricalCrossentropy(from_logits=True),
                     "loss CategoricalCrossentropy (logits)", activation=None),
        _categorical(K.CategoricalCrossentropy(label_smoothing=0.1),
                     "loss CategoricalCrossentropy (label smoothing)"),
        _categorical(K.CategoricalCrossentropy(from_logits=True, label_smoothing=0.2),
                     "loss CategoricalCrossentropy (logits, label smoothing)", activation=None),
        _categorical("categorical_focal_crossentropy", "loss categorical_focal_crossentropy"),
        _categorical(K.CategoricalFocalCrossentropy(from_logits=True, label_smoothing=0.1),
                     "loss CategoricalFocalCrossentropy (logits, smoothing)", activation=None),
        _sparse("sparse_categorical_crossentropy", "loss sparse_categorical_crossentropy"),
        _sparse(K.SparseCategoricalCrossentropy(from_logits=True),
                "loss SparseCategoricalCrossentropy (logits)", activation=None),
        _sparse(K.SparseCategoricalCrossentropy(ignore_class=0),
                "loss SparseCategoricalCrossentropy (ignore_class)"),
        _sparse(K.CategoricalGeneralizedCrossEntropy(q=0.5),
                "loss CategoricalGeneralizedCrossEntropy"),
        _binary("hinge", "loss hinge", activation="tanh"),
        _binary("squared_hinge", "loss squared_hinge", activation="tanh"),
        _categorical("categorical_hinge", "loss categorical_hinge", activation=None),
        _categorical("dice", "loss dice", activation="sigmoid"),
        _categorical(K.Tversky(alpha=0.3, beta=0.7), "loss Tversky", activation="sigmoid"),
        _sparse(K.Circle(), "loss Circle", activation=None),
        Item("loss ctc", LOSSES, lambda x: L.Dense(5)(x), ctc_data, (6, 3), loss=K.CTC()),
    ]


def metrics():
    M = keras.metrics

    def binary(fn, name):
        return Item(f"metric {name}", METRICS, lambda x: L.Dense(1, activation="sigmoid")(x),
                    lambda: binary_data((6,)), (6,), loss="binary_crossentropy", metrics=fn)

    def categorical(fn, name, loss="categorical_crossentropy"):
        return Item(f"metric {name}", METRICS, lambda x: L.Dense(4, activation="softmax")(x),
                    lambda: onehot_data((6,)), (6,), loss=loss, metrics=fn)

    def sparse(fn, name, **kwargs):
        return Item(f"metric {name}", METRICS, lambda x: L.Dense(4, activation="softmax")(x),
                    lambda: class_data((6,)), (6,), loss="sparse_categorical_crossentropy",
                    metrics=fn, **kwargs)

    def regression(fn, name, positive=False):
        data = positive_data if positive else regression_data
        return Item(f"metric {name}", METRICS, lambda x: L.Dense(3, activation="softplus")(x),
                    lambda: data((6,), (3,)), (6,), metrics=fn)

    thresholds = [0.3, 0.5, 0.7]
    return [
        sparse(lambda: ["accuracy"], "accuracy (sparse)", partial_batch=True),
        binary(lambda: ["accuracy", M.BinaryAccuracy(threshold=0.4, name="ba")],
               "BinaryAccuracy"),
        categorical(lambda: ["accuracy", M.CategoricalAccuracy(name="ca")],
                    "CategoricalAccuracy"),
        sparse(lambda: [M.SparseCategoricalAccuracy()], "SparseCategoricalAccuracy"),
        regression(lambda: [M.Accuracy()], "Accuracy"),
        categorical(lambda: [M.TopKCategoricalAccuracy(k=2)], "TopKCategoricalAccuracy"),
        sparse(lambda: [M.SparseTopKCategoricalAccuracy(k=2)], "SparseTopKCategoricalAccuracy"),
        binary(lambda: [M.AUC()], "AUC"),
        binary(lambda: [M.AUC(curve="PR", summation_method="minoring", num_thresholds=20)],
               "AUC (PR, minoring)"),
        categorical(lambda: [M.AUC(multi_label=True, num_labels=4)], "AUC (multi_label)"),
        binary(lambda: [M.Precision(), M.Recall()], "Precision and Recall"),
        binary(lambda: [M.Precision(thresholds=thresholds), M.Recall(thresholds=thresholds)],
               "Precision and Recall (thresholds)"),
        categorical(lambda: [M.Precision(top_k=2), M.Recall(class_id=1)],
                    "Precision (top_k) and Recall (class_id)"),
        binary(lambda: [M.TruePositives(), M.FalsePositives(), M.TrueNegatives(),
                        M.FalseNegatives(thresholds=thresholds)], "confusion counts"),
        binary(lambda: [M.PrecisionAtRecall(0.5), M.RecallAtPrecision(0.5),
                        M.SensitivityAtSpecificity(0.5), M.SpecificityAtSensitivity(0.5)],
               "at-point metrics"),
        sparse(lambda: [M.MeanIoU(num_classes=4, sparse_y_pred=False)], "MeanIoU"),
        categorical(lambda: [M.IoU(4, [0, 2], sparse_y_true=False, sparse_y_pred=False),
                             M.OneHotIoU(4, [1]), M.OneHotMeanIoU(4)], "IoU family"),
        binary(lambda: [M.BinaryIoU([0, 1], threshold=0.5)], "BinaryIoU"),
        categorical(lambda: [M.F1Score(), M.FBetaScore(beta=2.0, average="macro",
                                                       threshold=0.3)],
                    "F1Score and FBetaScore"),
        regression(lambda: ["mae", "mse", M.RootMeanSquaredError(), M.CosineSimilarity(),
                            M.LogCoshError(), M.R2Score(),
                            M.MeanMetricWrapper(lambda t, p: abs(t - p), name="custom_mean")],
                   "regression metrics"),
        regression(lambda: ["mape", "msle", M.Poisson(), M.KLDivergence()],
                   "regression metrics (positive targets)", positive=True),
        regression(lambda: [M.PearsonCorrelation(), M.ConcordanceCorrelation()],
                   "correlation metrics"),
        categorical(lambda: [M.CategoricalCrossentropy(), M.KLDivergence(),
                             M.CategoricalHinge()], "probabilistic metrics"),
        binary(lambda: [M.BinaryCrossentropy(), M.Hinge(), M.SquaredHinge()],
               "binary probabilistic and hinge metrics"),
        sparse(lambda: [M.SparseCategoricalCrossentropy()], "SparseCategoricalCrossentropy"),
    ]


def optimizers():
    O, S = keras.optimizers, keras.optimizers.schedules
    names = {
        "SGD": lambda: O.SGD(0.05),
        "SGD momentum nesterov": lambda: O.SGD(0.05, momentum=0.9, nesterov=True),
        "Adam": lambda: O.Adam(0.01),
        "Adam amsgrad": lambda: O.Adam(0.01, amsgrad=True),
        "AdamW": lambda: O.AdamW(0.01),
        "Adamax": lambda: O.Adamax(0.01),
        "Nadam": lambda: O.Nadam(0.01),
        "RMSprop centered": lambda: O.RMSprop(0.01, centered=True),
        "Adagrad": lambda: O.Adagrad(0.05),
        "Adadelta": lambda: O.Adadelta(0.5),
        "Adafactor": lambda: O.Adafactor(0.05),
        "Ftrl": lambda: O.Ftrl(0.05),
        "Lion": lambda: O.Lion(0.01),
        "Lamb": lambda: O.Lamb(0.01),
        "Muon": lambda: O.Muon(0.01),
        "SGD clipnorm": lambda: O.SGD(0.05, clipnorm=0.1),
        "SGD clipvalue": lambda: O.SGD(0.05, clipvalue=0.01),
        "SGD global_clipnorm": lambda: O.SGD(0.05, global_clipnorm=0.1),
        "Adam use_ema": lambda: O.Adam(0.01, use_ema=True),
        "SGD gradient_accumulation_steps": lambda: O.SGD(0.05, gradient_accumulation_steps=2),
        "SGD exponential decay": lambda: O.SGD(S.ExponentialDecay(0.05, 2, 0.5)),
        "SGD cosine decay": lambda: O.SGD(S.CosineDecay(0.05, 4)),
        "SGD piecewise constant": lambda: O.SGD(S.PiecewiseConstantDecay([1, 2],
                                                                         [0.05, 0.02, 0.01])),
        "SGD polynomial decay": lambda: O.SGD(S.PolynomialDecay(0.05, 4)),
        "SGD inverse time decay": lambda: O.SGD(S.InverseTimeDecay(0.05, 2, 0.5)),
    }
    return [on((6,), lambda x: L.Dense(4, activation="tanh")(x), f"optimizer {n}",
               "optimizers", optimizer=f) for n, f in names.items()]



def _f16(tolerance, reference_policy="float32"):
    """Under mixed_float16, against the float32 twin (TensorFlow's own float16 kernels take
    different paths on different processors) within `tolerance` (see `tolerances`)."""
    return {"policy": "mixed_float16", "tolerance": tolerance,
            "reference_policy": reference_policy}


def mixed_precision():
    g = "mixed precision"
    return [
        on((6,), lambda x: L.Dense(5, activation="relu")(x), "mixed_float16 Dense", g,
           **_f16(T.MIXED_DENSE)),
        on((7, 7, 4), lambda x: L.BatchNormalization()(L.Conv2D(3, 3)(x)),
           "mixed_float16 Conv2D and BatchNormalization", g, **_f16(T.MIXED_CONV_BN)),
        on((5, 6), lambda x: L.LayerNormalization()(L.MultiHeadAttention(2, 3)(x, x)),
           "mixed_float16 MultiHeadAttention and LayerNormalization", g,
           **_f16(T.MIXED_ATTENTION)),
        on((5, 3), lambda x: L.LSTM(4)(x), "mixed_float16 LSTM", g, **_f16(T.MIXED_LSTM)),
        Item("mixed_float16 softmax classifier", g,
             lambda x: L.Dense(4, activation="softmax", dtype="float32")(L.Dense(8)(x)),
             lambda: class_data((6,)), (6,), loss="sparse_categorical_crossentropy",
             metrics=lambda: ["accuracy"], **_f16(T.MIXED_CLASSIFIER)),
        on((6,), lambda x: L.Dense(5)(x), "mixed_float16 Adam (loss scale)", g,
           optimizer=lambda: keras.optimizers.Adam(0.01), **_f16(T.MIXED_DENSE_ADAM)),
        # Automatic loss scaling: float32 gradients feed no statistics, so the factor
        # grows at every update (by powers of two: exact), as on the float32 twin.
        on((6,), lambda x: L.Dense(5)(x), "mixed_float16 automatic loss scaling", g,
           optimizer=lambda: ALSOptimizer(keras.optimizers.SGD(0.05), 64,
                                          update_frequency=1, max_loss_scaling_factor=4096),
           **_f16(T.MIXED_DENSE)),
        on((6,), lambda x: L.Dense(5)(x), "mixed_float16 loss scale growth", g,
           optimizer=lambda: keras.optimizers.LossScaleOptimizer(
               keras.optimizers.SGD(0.05), initial_scale=128.0, dynamic_growth_steps=1),
           **_f16(T.MIXED_DENSE)),
        # Gradients overflow float16 at the first step or two; then the scale is small
        # enough and the steps apply: both branches of the conditional update run.
        on((6,), lambda x: L.Dense(5)(x), "mixed_float16 loss scale overflow", g,
           optimizer=lambda: keras.optimizers.LossScaleOptimizer(
               keras.optimizers.SGD(0.05), initial_scale=2.0**16), steps=4,
           **_f16(T.MIXED_OVERFLOW, reference_policy=None)),
    ]
