"""Workloads of the memory cases (`test_memory_fit.py`): Graphcore's published programs
rebuilt with ipu_keras, compiled (not run) for one simulated Mk2 IPU.

Each workload returns the executable's memory summary (`Executable.memory`: bytes per
tile, `total_bytes`, `max_tile_bytes`...) or, when the compiler raises
`OutOfTileMemoryError` (the program does not fit), the error's figures
(`out_of_memory`). Only the compile is needed: Poplar decides whether a program fits
at compile time too. Variables are created
outside the traced function, as TensorFlow requires, and read by it.
"""
import contextlib
import os
from unittest import mock

import numpy as np

from tests.fidelity import mnist_cnn

MK2_TILES = 1472


def configure(code=True, proportion=None, partials="float", recompute=False,
              tiles=MK2_TILES):
    """One Mk2 IPU (1472 tiles, or an IPU Model of `tiles`); `code`:
    `ipu_model.compile_ipu_code` (hardware always holds its code); `proportion` and
    `partials`: availableMemoryProportion and partialsType of matmuls and convs;
    `recompute`: `allow_recompute`."""
    import ipu_keras as ipu

    cfg = ipu.config.IPUConfig()
    cfg.auto_select_ipus = 1
    cfg.allow_recompute = recompute
    cfg.ipu_model.compile_ipu_code = code
    cfg.ipu_model.tiles_per_ipu = tiles
    options = {"partialsType": partials}
    if proportion is not None:
        options["availableMemoryProportion"] = str(proportion)
    cfg.matmuls.poplar_options = options
    cfg.convolutions.poplar_options = options
    cfg.configure_ipu_system()


def out_of_memory(error):
    """The figures of an `OutOfTileMemoryError`, in the memory summary's names."""
    return {"out_of_memory": {"tile": error.tile, "bytes_used": error.bytes_used},
            "max_tile_bytes": error.bytes_used, "total_bytes": None}


def compile_only(fn, args=(), ipu_model=False):
    """Trace `fn(*args)` on the IPU and compile it: its memory summary, or the
    out-of-memory error's figures. `ipu_model`: compile with `--use_ipu_model`, as
    Graphcore's IPU TensorFlow tests run (the IPU Model does not stop on a tile out of
    memory)."""
    import ipu_keras as ipu
    from ipu_keras._src.driver import compile as driver_compile
    from ipu_keras._src.runtime import outfeeds
    from ipu_keras._src.tracer import trace
    from ipu_keras.errors import OutOfTileMemoryError

    flags = {"TF_POPLAR_FLAGS": "--use_ipu_model" if ipu_model else ""}
    with ipu.scopes.ipu_scope("/device:IPU:0"), mock.patch.dict(os.environ, flags):
        traced = trace(fn, args, outfeed_queues=outfeeds.registry())
        try:
            return driver_compile.compile_for_ipu(traced.graph).memory
        except OutOfTileMemoryError as error:
            return out_of_memory(error)


# -- Poplar tutorial 4 (poplin matMul of variables mapped linearly) -----------------------


def two_matmuls(m1, m2, m3, code=True):
    """tut4's program: m4 = m1 @ m2, m5 = m4 @ m3, float32 variables of these shapes."""
    import tensorflow as tf

    configure(code=code)
    a, b, c = (tf.Variable(tf.zeros(s, tf.float32)) for s in (m1, m2, m3))
    return compile_only(lambda: tf.matmul(tf.matmul(a, b), c))


# -- graphcore/tensorflow size tests ---------------------------------------------------


def _sgd_step(loss_fn, variables, train, dtype):
    """`loss_fn`'s value, after one SGD step of rate 0.01 on `variables` if `train`."""
    import tensorflow as tf

    def step(x, y):
        if not train:
            return loss_fn(x, y)
        with tf.GradientTape() as tape:
            loss = loss_fn(x, y)
        for v, g in zip(variables, tape.gradient(loss, variables)):
            v.assign_sub(tf.cast(0.01, dtype) * g)
        return loss
    return step


def _dense_loss(fan_in, widths, relu):
    """float16 dense layers (`xw_plus_b`, then relu if `relu`) of `widths` units from
    `fan_in` inputs, and softmax cross-entropy: (variables, loss_fn(x, labels))."""
    import tensorflow as tf

    f16 = tf.float16
    layers = []
    for units in widths:
        w = tf.Variable(tf.cast(tf.random.truncated_normal((fan_in, units), stddev=0.01), f16))
        layers.append((w, tf.Variable(tf.zeros((units,), f16))))
        fan_in = units

    def loss_fn(x, y):
        for w, b in layers:
            x = tf.matmul(x, w) + b
            x = tf.nn.relu(x) if relu else x
        return tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(
            labels=tf.stop_gradient(y), logits=x))

    return [v for layer in layers for v in layer], loss_fn


def three_dense_layers(batch, train):
    """MatMulSizeTest (size_speed_tests/matmul_size_test.py): float16 x[batch, 50176]
    through dense layers of 32, 64, 64 units (xw_plus_b, relu), softmax cross-entropy;
    IPU Model of 1472 tiles without code; `train`: one GradientDescent step."""
    import tensorflow as tf

    configure(code=False)
    variables, loss_fn = _dense_loss(112 * 112 * 4, (32, 64, 64), relu=True)
    step = _sgd_step(loss_fn, variables, train, tf.float16)
    x = np.zeros((batch, 112 * 112 * 4), np.float16)
    return compile_only(step, (x, np.zeros((batch, 64), np.float16)))


def ten_dense_layers(tiles):
    """CombinedWeightsTest (size_speed_tests/combined_weights_test.py): float16 x[16, 4]
    through ten dense layers of 256 units (xw_plus_b, no activation), softmax
    cross-entropy, for inference; IPU Model of `tiles` Mk2 tiles, code compiled."""
    configure(code=True, tiles=tiles)
    _, loss_fn = _dense_loss(4, (256,) * 10, relu=False)
    return compile_only(loss_fn, (np.zeros((16, 4), np.float16),
                                  np.zeros((16, 256), np.float16)))


def outlined_dense_pair():
    """FunctionalOpsTest.testFunctionInferenceWithVariableScope (python/ipu/tests/
    functional_ops_test.py): an outlined function, matmul of a [64, 64] float32 input
    by its own [64, 64] weights, add, sigmoid, called twice (a = f(a, b); a - f(a, c));
    IPU Model of 8 tiles without code."""
    import tensorflow as tf

    import ipu_keras as ipu

    configure(code=False, tiles=8)
    weights = {name: tf.Variable(tf.ones((64, 64), tf.float32)) for name in ("one", "two")}

    def func(a, b, name):
        @ipu.outlined_function
        def outlined_func(a, b):
            return tf.sigmoid(tf.matmul(a, weights[name]) + b)
        return outlined_func(a, b)

    def body(a, b, c):
        a = func(a, b, "one")
        return a - func(a, c, "two")

    x = np.ones((64, 64), np.float32)
    return compile_only(body, (x, x, x))



def _trained_logits(logits_fn, variables):
    """The training body of FunctionalOpsTest's function tests: `logits_fn(*inputs)`, its
    mean sparse softmax cross-entropy against `labels`, one GradientDescent step of rate
    0.001 on `variables`; the body returns the logits."""
    import tensorflow as tf

    def step(*inputs_and_labels):
        *inputs, labels = inputs_and_labels
        with tf.GradientTape() as tape:
            logits = logits_fn(*inputs)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                logits=logits, labels=labels))
        for v, g in zip(variables, tape.gradient(loss, variables)):
            v.assign_sub(0.001 * g)
        return logits
    return step


def outlined_pair_training(split=False):
    """FunctionalOpsTest.testFunctionTraining (`split`: testFunctionTrainingConstants):
    an outlined function of (lhs, rhs, a), sigmoid(lhs @ rhs + a), called twice with the
    [64, 64] float32 weights as its rhs (x = f(a, w0, b); x - f(x, w1, c)), and one
    training step (`_trained_logits`); `split`: the function multiplies by the two
    halves of rhs's columns and concatenates the products. IPU Model of 8 tiles without
    code."""
    import tensorflow as tf

    import ipu_keras as ipu

    configure(code=False, tiles=8)
    weights = [tf.Variable(tf.ones((64, 64), tf.float32)) for _ in range(2)]

    @ipu.outlined_function
    def func(lhs, rhs, a):
        if split:
            x = tf.concat([tf.matmul(lhs, half) for half in tf.split(rhs, 2, -1)], axis=1)
        else:
            x = tf.matmul(lhs, rhs)
        return tf.sigmoid(x + a)

    def logits(a, b, c):
        x = func(a, weights[0], b)
        return x - func(x, weights[1], c)

    x = np.ones((64, 64), np.float32)
    labels = np.ones((64,), np.int32)
    return compile_only(_trained_logits(logits, weights), (x, x, x, labels))


def nested_outlined_training():
    """FunctionalOpsTest.testNestedFunctionTraining: an outlined sigmoid of an outlined
    x @ w + bias (each call its own [64, 64] and [64] float32 variables), called twice
    on a [64, 64] input, and one training step (`_trained_logits`). IPU Model of 8 tiles
    without code."""
    import tensorflow as tf

    import ipu_keras as ipu

    configure(code=False, tiles=8)
    layers = [(tf.Variable(tf.ones((64, 64), tf.float32)),
               tf.Variable(tf.ones((64,), tf.float32))) for _ in range(2)]

    def cached_func(x, w, bias):
        @ipu.outlined_function
        def matmul_with_bias(x):
            return x @ w + bias

        @ipu.outlined_function
        def func(x):
            return tf.sigmoid(matmul_with_bias(x))
        return func(x)

    def logits(x):
        for w, bias in layers:
            x = cached_func(x, w, bias)
        return x

    variables = [v for layer in layers for v in layer]
    step = _trained_logits(logits, variables)
    return compile_only(step, (np.ones((64, 64), np.float32), np.ones((64,), np.int32)))


def broadcast_matmul_pair():
    """MatMulGraphCachingTest.testMatMulBroadcast (compiler/plugin/poplar/tests/
    matmul_graph_caching_test.py): a float16 [1024] input broadcast to [1024, 1024] times
    [1024, 1024] weights, then a [1024, 1024] input times that product; the 8-tile IPU
    Model without code, which runs it though its tiles hold more than 624 KiB."""
    import tensorflow as tf

    configure(code=False, tiles=8)
    weights = tf.Variable(tf.zeros((1024, 1024), tf.float16))

    def body(in0, in1):
        return tf.matmul(in1, tf.matmul(tf.broadcast_to(in0, (1024, 1024)), weights))

    return compile_only(body, (np.zeros(1024, np.float16), np.zeros((1024, 1024), np.float16)),
                        ipu_model=True)


def broadcast_convs():
    """ConvGraphCachingTest.testConvolutionsWithBroadcast (compiler/plugin/poplar/tests/
    conv_graph_caching_test.py): a float32 [2] input broadcast to a [2, 256, 256, 2]
    image and to [2, 2, 2, 2] weights, two 'same' convolutions of stride 1 by those
    weights; the 8-tile IPU Model without code."""
    import tensorflow as tf

    configure(code=False, tiles=8)

    def body(x):
        weights = tf.broadcast_to(x, (2, 2, 2, 2))
        y = tf.nn.conv2d(tf.broadcast_to(x, (2, 256, 256, 2)), weights, 1, "SAME")
        return tf.nn.conv2d(y, weights, 1, "SAME")

    return compile_only(body, (np.ones(2, np.float32),), ipu_model=True)

def serialized_lookup(dict_size=20000, emb_size=128, splits=10):
    """FunctionalOpsTest.testFunctionSerializedLookup: a float16 [20000, 128] table
    streamed in, looked up at 20 indices in 10 slices of 2000 rows, each by one outlined
    function (keep_input_layouts=False) that shifts the indices, gathers
    (`ipu.embedding_ops.embedding_lookup`) and masks the rows outside its slice; the
    slices' results summed. The 8-tile IPU Model without code, which runs it though its
    tiles hold more than 624 KiB."""
    import tensorflow as tf

    import ipu_keras as ipu

    configure(code=False, tiles=8)
    rows = dict_size // splits

    @ipu.outlined_function(keep_input_layouts=False)
    def func(table, indices, min_idx, max_idx):
        x = ipu.embedding_ops.embedding_lookup(table, indices - min_idx)
        mask = tf.logical_and(tf.less(indices, max_idx), tf.greater_equal(indices, min_idx))
        return x * tf.expand_dims(tf.cast(mask, tf.float16), 1)

    def body(table, indices):
        output = func(tf.slice(table, [0, 0], [rows, emb_size]), indices, 0, rows)
        for i in range(1, splits):
            part = tf.slice(table, [rows * i, 0], [rows, emb_size])
            output = tf.add(output, func(part, indices, rows * i, rows * (i + 1)))
        return output

    return compile_only(body, (np.zeros((dict_size, emb_size), np.float16),
                               np.zeros(2 * splits, np.int32)), ipu_model=True)


def shared_embedding_weights(transpose_matmul):
    """AllocationFinderPriorityTest.testMatmulAndEmbedding (compiler/plugin/poplar/tests/
    allocation_finder_priority_test.py): float16 weights of a 20000-word vocabulary and
    128 wide, shared by an embedding lookup of 50 ids and the product of those rows by
    the weights, the logits [50, 20000]; `transpose_matmul`: weights [20000, 128], the
    product by their transpose, else weights [128, 20000] looked up through their
    transpose. The 8-tile IPU Model with code, which runs it though its tiles hold more
    than 624 KiB."""
    import tensorflow as tf

    import ipu_keras as ipu

    configure(code=True, tiles=8)
    shape = (20000, 128) if transpose_matmul else (128, 20000)
    weights = tf.Variable(tf.zeros(shape, tf.float16))

    def body(ids):
        if transpose_matmul:
            rows = ipu.embedding_ops.embedding_lookup(weights, ids)
            return tf.matmul(rows, weights, transpose_b=True)
        rows = ipu.embedding_ops.embedding_lookup(tf.transpose(weights), ids)
        return tf.matmul(rows, weights)

    return compile_only(body, (np.ones(50, np.int32),), ipu_model=True)


class _Variables:
    """Variables made on the first (eager) pass and handed out again, in the same order,
    on every later pass (the traced one)."""

    def __init__(self, dtype):
        self.dtype, self.made, self.next = dtype, [], 0

    def __call__(self, shape, stddev=0.1, zero=False):
        import tensorflow as tf

        if self.next == len(self.made):
            value = (tf.zeros(shape, self.dtype) if zero else
                     tf.cast(tf.random.truncated_normal(shape, stddev=stddev), self.dtype))
            self.made.append(tf.Variable(value))
        self.next += 1
        return self.made[self.next - 1]

    def rewind(self, fn):
        def rewound(*args):
            self.next = 0
            return fn(*args)
        return rewound


def resnet18_no_batchnorm(train):
    """Resnet18_No_Batchnorm (size_speed_tests/resnet_size_test.py), float16, batch 1,
    224x224x4: conv 7x7/2 (64) + relu, max pool 3/2, one block of two residual units of
    two 3x3 convs (64), global max pool, dense 1000, softmax cross-entropy; IPU Model of
    1472 tiles without code; `train`: one GradientDescent step."""
    import tensorflow as tf

    configure(code=False)
    var = _Variables(tf.float16)

    def conv(x, k, stride, out):
        w = var([k, k, x.shape[-1], out])
        return tf.nn.conv2d(x, w, [1, stride, stride, 1], "SAME") + var([out], zero=True)

    def inference(x):
        x = tf.nn.max_pool2d(tf.nn.relu(conv(x, 7, 2, 64)), 3, 2, "SAME")
        for _ in range(2):
            x = tf.nn.relu(conv(tf.nn.relu(conv(x, 3, 1, 64)), 3, 1, 64) + x)
        x = tf.nn.max_pool2d(x, [x.shape[1], x.shape[2]], 1, "VALID")
        x = tf.reshape(x, [x.shape[0], x.shape[3]])
        return tf.matmul(x, var([64, 1000], 0.01)) + var([1000], zero=True)

    def loss_fn(x, y):
        return tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(
            labels=tf.stop_gradient(y), logits=inference(x)))

    x, y = np.zeros((1, 224, 224, 4), np.float16), np.zeros((1, 1000), np.float16)
    inference(x)   # makes the variables
    return compile_only(var.rewind(_sgd_step(loss_fn, var.made, train, tf.float16)), (x, y))


def serialized_matmul():
    """MatMulSizeTest.testSerializedMatmul: x[30522, 768] + concat of six outlined
    float16 matmuls y[5087, 128] @ z[128, 768]; IPU Model of 1472 tiles without code."""
    import tensorflow as tf

    from ipu_keras.ops.functional_ops import outlined_function

    configure(code=False)
    rows, inner, outer = 30522, 768, 128

    def model(x, y, z):
        @outlined_function
        def product(lhs, rhs):
            return tf.matmul(lhs, rhs)
        part = rows // 6
        return x + tf.concat([product(y[i * part:(i + 1) * part], z) for i in range(6)], 0)

    shapes = ((rows, inner), (rows, outer), (outer, inner))
    return compile_only(model, [np.ones(s, np.float16) for s in shapes])


# -- Keras models ----------------------------------------------------------------------


def mnist_cnn_training(batch=64):
    """Graphcore's Keras tutorial CNN, one SGD step of `batch` images through `fit` (the
    public path: an out-of-memory error would come out of `fit`)."""
    import keras

    import ipu_keras as ipu
    from ipu_keras import profiling
    from ipu_keras.errors import OutOfTileMemoryError

    configure(code=True)
    x = np.zeros((batch, 28, 28, 1), np.float32)
    y = np.eye(10, dtype=np.float32)[np.zeros(batch, int)]
    with ipu.ipu_strategy.IPUStrategy().scope():
        keras.utils.set_random_seed(1)
        model = mnist_cnn(keras)
        model.compile("sgd", "categorical_crossentropy", steps_per_execution=1)
        try:
            model.fit(x, y, batch_size=batch, epochs=1, verbose=0)
        except OutOfTileMemoryError as error:
            return out_of_memory(error)
    return profiling.last_report().memory


@contextlib.contextmanager
def _global_policy(dtype):
    """Keras's global dtype policy set to `dtype` while the block builds a model."""
    import keras

    policy = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy(dtype)
    try:
        yield
    finally:
        keras.mixed_precision.set_global_policy(policy)


def _inference(model, batch, dtype):
    """`model` compiled for inference on `batch` 224x224x3 images of `dtype`."""
    return compile_only(lambda images: model(images, training=False),
                        (np.zeros((batch, 224, 224, 3), dtype),))


def _resnext_32x4d(stage_units, dtype):
    """ResNeXt with 32 groups of width 4 (torchvision's and Cadene's resnext*_32x4d) on
    224x224x3 images, `stage_units` bottleneck units per stage, built with Keras layers
    in `dtype` (weights and compute): the stem, grouped 3x3 convs, batch norms, the
    projection shortcut of each stage's first unit, the 1000-way classifier."""
    import keras

    with _global_policy(dtype):
        layers = keras.layers
        x = inputs = keras.Input((224, 224, 3))
        x = layers.Conv2D(64, 7, 2, padding="same", use_bias=False)(x)
        x = layers.ReLU()(layers.BatchNormalization()(x))
        x = layers.MaxPooling2D(3, 2, padding="same")(x)
        for stage, (units, planes) in enumerate(zip(stage_units, (64, 128, 256, 512))):
            width = planes * 2    # 32 groups x (4 x planes / 64) channels
            for unit in range(units):
                stride = 2 if unit == 0 and stage > 0 else 1
                y = layers.ReLU()(layers.BatchNormalization()(
                    layers.Conv2D(width, 1, use_bias=False)(x)))
                y = layers.ReLU()(layers.BatchNormalization()(layers.Conv2D(
                    width, 3, stride, padding="same", groups=32, use_bias=False)(y)))
                y = layers.BatchNormalization()(
                    layers.Conv2D(planes * 4, 1, use_bias=False)(y))
                if unit == 0:
                    x = layers.BatchNormalization()(
                        layers.Conv2D(planes * 4, 1, stride, use_bias=False)(x))
                x = layers.ReLU()(layers.Add()([y, x]))
        outputs = layers.Dense(1000)(layers.GlobalAveragePooling2D()(x))
        return keras.Model(inputs, outputs)


def resnext50_inference(batch, proportion):
    """torchvision's resnext50_32x4d in float32 for inference; code compiled (hardware)."""
    configure(code=True, proportion=proportion)
    return _inference(_resnext_32x4d((3, 4, 6, 3), "float32"), batch, np.float32)


def resnext101_half_inference(batch, proportion):
    """ResNeXt-101 32x4d in float16 with half partials, for inference; code compiled."""
    configure(code=True, proportion=proportion, partials="half")
    return _inference(_resnext_32x4d((3, 4, 23, 3), "float16"), batch, np.float16)


def _half_resnet50(proportion, recompute=False):
    """Keras's ResNet50 in float16 (weights and compute), half partials, code compiled."""
    import keras

    configure(code=True, proportion=proportion, partials="half", recompute=recompute)
    with _global_policy("float16"):
        return keras.applications.ResNet50(weights=None)


def resnet50_half_inference(batch, proportion):
    """ResNet-50 in float16 for inference on `batch` 224x224x3 images."""
    return _inference(_half_resnet50(proportion), batch, np.float16)


MLPERF_SPLITS = ("conv2_block1_out", "conv2_block3_out", "conv3_block4_out")
"""The `pipeline-splits` of Graphcore's config resnet50_mlperf_bs16: the Keras ResNet50
layers whose outputs end pipeline stages 0, 1 and 2."""


def _split(model, ends):
    """`model` (a chain of blocks) cut into sub-models after the layers named `ends`."""
    import keras

    cuts = [model.get_layer(name).output for name in ends]
    return [keras.Model(a, b) for a, b in zip([model.inputs[0]] + cuts,
                                              cuts + [model.outputs[0]])]


def _fused_batch_norm_layer():
    """Graphcore's `custom_batch_norm` (vision/cnns/tensorflow2/normalization/
    batch_norm.py, `BatchNormIPU`): TensorFlow's fused batch norm on the float16
    activations (one FusedBatchNormV3 and its gradient, statistics in float32), where
    Keras 3's BatchNormalization builds the norm from float32 copies of them. Its
    scale and offset are float32 here: TensorFlow's op wants them so (the IPU's took
    float16); its moving statistics (per channel) are left out."""
    import keras
    import tensorflow as tf

    class FusedBatchNorm(keras.layers.Layer):
        def __init__(self, epsilon=1.001e-5, **kwargs):
            super().__init__(**kwargs)
            self.epsilon = epsilon

        def build(self, input_shape):
            channels = (input_shape[-1],)
            self.gamma = self.add_weight(shape=channels, dtype="float32", initializer="ones")
            self.beta = self.add_weight(shape=channels, dtype="float32", initializer="zeros")

        def call(self, x, training=None, mask=None):
            del training, mask     # always batch statistics, as the training step uses
            return tf.compat.v1.nn.fused_batch_norm(x, self.gamma, self.beta,
                                                    epsilon=self.epsilon)[0]

    return FusedBatchNorm


def _with_fused_batch_norm(model):
    """`model` cloned with each BatchNormalization replaced by `_fused_batch_norm_layer`."""
    import keras

    fused = _fused_batch_norm_layer()

    def clone(layer):
        if isinstance(layer, keras.layers.BatchNormalization):
            return fused(layer.epsilon, name=layer.name, dtype=layer.dtype_policy)
        return layer.__class__.from_config(layer.get_config())

    return keras.models.clone_model(model, clone_function=clone)


def resnet50_half_pipelined_training(batch, proportion, recompute=True, accumulation=9):
    """Graphcore's MLPerf ResNet-50 training config (resnet50_mlperf_bs16) on one IPU:
    Keras's ResNet50 in float16 cut into four pipeline stages at `MLPERF_SPLITS`, all on
    IPU 0 (device mapping [0, 0, 0, 0]) with the Sequential schedule, `accumulation`
    micro-batches of `batch` images per weight update (the config's 2304 images over 16
    replicas of 16: 9), SGD with momentum 0.9 (float16 momenta), Graphcore's fused batch
    norm (`_with_fused_batch_norm`), `recompute`: `allow_recompute` (the Sequential
    schedule's Auto mode recomputes interleaved)."""
    import keras
    import tensorflow as tf

    import ipu_keras as ipu
    from ipu_keras.ops import pipelining_ops as po

    model = _with_fused_batch_norm(_half_resnet50(proportion, recompute))
    stages = _split(model, MLPERF_SPLITS)
    optimizer = keras.optimizers.SGD(0.01, momentum=0.9)
    optimizer.build(model.trainable_variables)
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def stage(sub):
        def run(x, labels):
            return (sub(x, training=True), labels)
        return run

    def loss(logits, labels):
        value = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(labels, logits))
        return po.OptimizerFunctionOutput(optimizer, value)

    def step(images, labels):
        return po.pipeline(
            [stage(sub) for sub in stages],
            gradient_accumulation_count=accumulation, inputs=[images, labels],
            outfeed_queue=outfeed, optimizer_function=loss, outfeed_loss=True,
            device_mapping=[0, 0, 0, 0], pipeline_schedule=po.PipelineSchedule.Sequential)

    return compile_only(step, (np.zeros((batch, 224, 224, 3), np.float16),
                               np.zeros((batch,), np.int32)))
