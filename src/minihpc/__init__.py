"""minihpc: a mini HPC cluster for rehearsing distributed PyTorch training.

Nothing here connects to Redis or registers anything at import time; every
process builds its own connections from an explicit :class:`Settings`.
"""

__version__ = "0.1.0"
