"""Passes over the Kernel IR: ConfigSpec derivation, and the analyses that backends share
(`tile_origins`: which tile each dimension of a value came from)."""
