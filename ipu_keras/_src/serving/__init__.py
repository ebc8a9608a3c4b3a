"""`ipu.serving`'s machinery: checking signatures (`signatures.py`), writing the export
(`export.py`: a TensorFlow SavedModel with the compiled IPU executable as an asset) and
running it on the simulated IPU (`runtime.py`). The public face is `ipu_keras.serving`;
`ipu_saved_model_cli run` uses the runtime for these exports."""
