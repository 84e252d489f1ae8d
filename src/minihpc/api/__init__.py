"""The REST API and web page (``minihpc api``): FastAPI over :mod:`minihpc.client`, so every
rule (validation, ownership, ordering) is the CLI's own."""
