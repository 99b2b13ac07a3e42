"""The command-line calculators, one thin module each over ``impls/`` (``mianjing zero``, ``kv``, ``pp``, ...).

Each module validates its options (bad input: one line, exit 2, raised as a ``ValueError`` subclass)
and prints a rich table; the numbers come from ``impls/``, never from the module itself.
"""
