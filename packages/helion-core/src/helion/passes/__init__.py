"""Passes over the Kernel IR: checks and ConfigSpec derivation."""
