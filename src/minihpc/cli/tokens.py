"""API tokens: ``minihpc token create USER``, ``list``, ``revoke`` (an admin's commands)."""

from __future__ import annotations

import sys
import time

from minihpc.cli.display import print_json, render, timestamp
from minihpc.client import access
from minihpc.client.session import open_store
from minihpc.core.config import Settings


def cmd_token(args, settings: Settings) -> int:
    store = open_store(settings)
    access.must_be_admin(access.for_cli(store), "managing API tokens")
    if args.action == "create":
        token = access.create_token(store, args.user, admin=args.admin)
        print(token)
        print(f"token for {args.user}{' (admin)' if args.admin else ''}: shown once, only its hash is kept; "
              "use it as 'Authorization: Bearer TOKEN' or MINIHPC_TOKEN", file=sys.stderr)
        return 0
    if args.action == "list":
        rows = access.tokens(store)
        if args.json:
            print_json(rows)
        else:
            print(render(["ID", "USER", "ADMIN", "CREATED"],
                         [[r["id"], r["user"], "yes" if r.get("admin") else "no", timestamp(r.get("created_at"))]
                          for r in rows]))
        return 0
    gone = access.revoke(store, user=args.user, token_id=args.id)
    print(f"revoked {gone} token{'s' if gone != 1 else ''} at {time.strftime('%H:%M:%S')}")
    return 0


def add_parsers(sub) -> None:
    p = sub.add_parser("token", help="API tokens for the REST API and web page (create, list, revoke)")
    actions = p.add_subparsers(dest="action", required=True, parser_class=type(p))
    c = actions.add_parser("create", help="make a token for USER (printed once)")
    c.add_argument("user")
    c.add_argument("--admin", action="store_true", help="may cancel anyone's jobs and drain nodes")
    c.set_defaults(func=cmd_token)
    ls = actions.add_parser("list", help="every token's id, user and creation time (never the token)")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=cmd_token)
    r = actions.add_parser("revoke", help="remove USER's tokens, or one by --id")
    r.add_argument("user", nargs="?", default=None)
    r.add_argument("--id", default=None, help="a token's id from 'token list'")
    r.set_defaults(func=cmd_token)
