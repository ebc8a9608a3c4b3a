"""The machinery behind the public modules of `ipu_keras`: private, as `jax._src` and
`keras.src` are. Its layers, bottom first, each importing only the ones below it
(`docs/architecture.md`; the contract in `.importlinter` is checked by the test suite):

ir -> ops (op definitions) -> device (targets, cost model, executable format, IPUConfig)
-> tracer | compiler -> simulator | reports -> runtime -> driver -> glue (keras | tf1),
with the leaves compat, flags, gc_pause, placement and keras_namespace at the bottom.
The tools (cli, demo, conformance, compat_names) stand above the public face: they use
it as a user does.

Nothing here is API: names and modules move without notice. Users import the modules
at the top of `ipu_keras` (Graphcore's layout).
"""
