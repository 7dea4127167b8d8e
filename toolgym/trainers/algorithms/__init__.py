"""Shared machinery of the algorithm plug-ins: registries and the Algorithm built from a preset."""
