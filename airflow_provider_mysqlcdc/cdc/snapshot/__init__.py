"""The snapshot: tables cut into chunks, read between watermarks, corrected and handed to the stream.

Import the submodules directly; this package re-exports nothing.
"""
