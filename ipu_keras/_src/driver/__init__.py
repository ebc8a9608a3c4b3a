"""The compile-and-run driver under the public API: tracing and compiling a function
(`compile`), running it on the device with its feeds (`executor`), the low-level
pipeline builder (`pipeline`) and the compile progress bar (`progress`)."""
