"""One module per ``heterosim`` sub-command, each with ``register(subparsers)``."""
