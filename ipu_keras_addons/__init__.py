"""Addons for ipu_keras: IPU layers, optimizers and tools (grown by later issues)."""
