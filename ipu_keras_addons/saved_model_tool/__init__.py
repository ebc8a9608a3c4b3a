"""`ipu_saved_model_cli`'s library: show, run and convert SavedModels for the simulated IPU.

The command (`cli.py`) only parses and prints; everything it does is here for tests and
scripts: `model` (reading, freezing and writing SavedModels), `inputs` (the `run` inputs),
`runner` (compile and run on the simulated IPU), `params` (the `convert ipu` options and
`--config_file`), `rewrite` (the graph conversions), `placement` (manual sharding and
pipeline stages) and `convert` (the whole conversion and the converted model's files).
"""
