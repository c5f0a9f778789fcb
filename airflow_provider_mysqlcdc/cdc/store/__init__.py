"""Where state lives and who owns the stream: object-storage credentials, finding state locations, the lease.

Import the submodules directly; this package re-exports nothing.
"""
