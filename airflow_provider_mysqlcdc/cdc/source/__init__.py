"""Talking to the source server: connect, check it is set up for CDC, discover the captured tables.

Import the submodules directly; this package re-exports nothing.
"""
