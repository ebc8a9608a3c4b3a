"""The conformance suite: the Keras catalogue on the simulated IPU against the CPU."""
