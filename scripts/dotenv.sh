# Helpers for the cluster's .env (sourced by the build and up scripts).
#
# .env is machine-local and never committed; it starts as a copy of .env.example with every
# empty secret filled by a freshly generated one, so no cluster ever runs on a default password.

ENV_FILE=${ENV_FILE:-.env}

env_get() {  # env_get KEY -> the value in .env, or nothing
    [ -f "$ENV_FILE" ] || return 0
    sed -n "s/^$1=//p" "$ENV_FILE" | tail -1
}

env_set() {  # env_set KEY VALUE: replace the line KEY=..., or append it
    local key=$1 value=$2 tmp
    tmp=$(mktemp "$ENV_FILE.XXXXXX")
    if grep -q "^$key=" "$ENV_FILE" 2>/dev/null; then
        awk -v k="$key" -v v="$value" 'index($0, k "=") == 1 { print k "=" v; next } { print }' "$ENV_FILE" > "$tmp"
    else
        { cat "$ENV_FILE" 2>/dev/null; echo "$key=$value"; } > "$tmp"
    fi
    chmod 600 "$tmp"
    mv "$tmp" "$ENV_FILE"
}

setting() {  # setting KEY [DEFAULT]: the environment wins over .env, as it does for Compose
    local v="${!1:-}"
    v=${v:-$(env_get "$1")}
    echo "${v:-${2:-}}"
}

grafana_enabled() { [[ ",$(setting COMPOSE_PROFILES)," == *,grafana,* ]]; }

secret() { python3 -c 'import secrets; print(secrets.token_urlsafe(24))'; }

env_ensure() {  # create .env from .env.example and generate every missing secret
    if [ ! -f "$ENV_FILE" ]; then
        umask 077
        cp .env.example "$ENV_FILE"
        chmod 600 "$ENV_FILE"
        echo "==> created $ENV_FILE from .env.example (secrets generated; keep it private)" >&2
    fi
    local key line
    # Settings added to .env.example since this .env was made arrive with their defaults.
    while IFS= read -r line; do
        key=${line%%=*}
        grep -q "^$key=" "$ENV_FILE" || env_set "$key" "${line#*=}"
    done < <(grep -E '^[A-Z_]+=' .env.example)
    for key in REDIS_MASTER_PASSWORD REDIS_NODE_PASSWORD REDIS_CLI_PASSWORD REDIS_API_PASSWORD REDIS_EXPORTER_PASSWORD \
               GRAFANA_ADMIN_PASSWORD RESTART_TOKEN ALERT_TOKEN; do
        if [ -z "$(env_get "$key")" ]; then
            env_set "$key" "$(secret)"
        fi
    done
}

REDIS_ACL_FILE=.minihpc/redis-users.acl

redis_acl_write() {  # Redis's ACL file (one user per role) from the passwords in .env
    local role tmp
    local -a vars=()
    for role in MASTER NODE CLI API EXPORTER; do
        vars+=("REDIS_${role}_PASSWORD=$(setting "REDIS_${role}_PASSWORD")")
    done
    mkdir -p "$(dirname "$REDIS_ACL_FILE")"
    tmp=$(mktemp "$REDIS_ACL_FILE.XXXXXX")
    # Digests only, no secret: the redis user in its container must be able to read it.
    env "${vars[@]}" PYTHONPATH=src python3 -m minihpc.state.acl > "$tmp"
    chmod 644 "$tmp"
    mv "$tmp" "$REDIS_ACL_FILE"
}
