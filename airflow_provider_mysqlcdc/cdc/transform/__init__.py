"""What a sink table looks like: a pipeline's ``route`` and ``transform`` rules, compiled and evaluated.

Import the submodules directly; this package re-exports nothing.
"""
