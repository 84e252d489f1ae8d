"""Registers an atexit handler and a weakref finalizer, then ends normally: each prints its
line at interpreter exit, as in any Python process."""

import atexit
import weakref


class Resource:
    pass


kept = Resource()
atexit.register(print, "EXIT atexit handler ran", flush=True)
weakref.finalize(kept, print, "EXIT finalizer ran", flush=True)
print("EXIT script done", flush=True)
