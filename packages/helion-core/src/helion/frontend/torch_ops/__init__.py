"""The op families of the torch table, one module each.

`helion.frontend.torch_table` assembles them into the one table the tracer looks up: import
that module, not these, so that every family is registered.
"""
