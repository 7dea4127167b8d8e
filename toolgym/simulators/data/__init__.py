"""Data shipped with toolgym: the embedded default catalog of simulated tools."""
