"""API tokens: who a bearer token names. Only each token's sha256 is stored, so a copy of
Redis gives nobody a way in; the token itself is shown once, when it is made."""

from __future__ import annotations

import json

from minihpc.state import keys
from minihpc.state.connect import text, texts


class Tokens:
    r: object

    def add_token(self, digest: str, record: dict) -> None:
        self.r.hset(keys.TOKENS, digest, json.dumps(record, sort_keys=True))

    def token_record(self, digest: str) -> dict | None:
        raw = text(self.r.hget(keys.TOKENS, digest))
        return json.loads(raw) if raw else None

    def token_records(self) -> dict[str, dict]:
        """Digest -> record, for every token."""
        return {digest: json.loads(raw) for digest, raw in texts(self.r.hgetall(keys.TOKENS)).items()}

    def remove_tokens(self, digests: list[str]) -> int:
        return int(self.r.hdel(keys.TOKENS, *digests)) if digests else 0
