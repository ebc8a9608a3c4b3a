"""The Keras glue: the trainer mixin that runs `fit`, `evaluate` and `predict` on the
simulated IPU, the models built on it, pipelining, accumulation and replication for Keras.
The public names are re-exported by `ipu_keras.keras`."""
