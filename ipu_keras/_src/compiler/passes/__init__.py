"""Compiler passes. Each is a pure function: Graph -> Graph, or Graph -> analysis."""
