"""Which extra of the package (pyproject.toml's optional-dependencies) a missing module belongs
to, so that a command run without it says what to install in one line instead of a traceback
(pure)."""

from __future__ import annotations

EXTRAS = {
    "torch": "node", "numpy": "node", "psutil": "node", "prometheus_client": "node", "yaml": "node",
    "fastapi": "api", "starlette": "api", "uvicorn": "api", "anyio": "api", "multipart": "api",
    "fastapi_offline": "api", "PIL": "report", "torchvision": "vision", "sklearn": "vision",
}
"""The extra (pyproject.toml's optional-dependencies) that brings each module ``pip install
minihpc`` leaves out: a command that imports one says which to install, not a traceback."""


def missing_extra(exc: BaseException) -> str | None:
    """The extra whose absence raised EXC, or None when EXC is not a missing module of one."""
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        return EXTRAS.get(exc.name.partition(".")[0])
    return None
