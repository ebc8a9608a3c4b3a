"""The machinery behind the public modules of `ipu_keras`: private, as `jax._src` and
`keras.src` are. Its layers, bottom first, each importing only the ones below it
(`docs/architecture.md`; the contract in `.importlinter` is checked by the test suite):

ir -> ops (op definitions) -> device (targets, cost model, executable format) ->
tracer, compiler -> simulator -> runtime -> glue (keras, tf1, driver, reports, cli).

Nothing here is API: names and modules move without notice. Users import the modules
at the top of `ipu_keras` (Graphcore's layout).
"""
