"""What tests/e2e/jobs/tenant.py's attacker tries of another user's job (issue 33): the Compose
test (tests/e2e/test_security.py) and its local-mode twin (tests/integration/test_tenants_local.py)
expect each refused."""

TENANT_ATTACKS = ("list their checkpoint", "read their checkpoint", "write their checkpoint",
                  "read their spooled script", "list their logs", "read their log")
