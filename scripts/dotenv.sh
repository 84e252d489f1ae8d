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
    for key in REDIS_PASSWORD GRAFANA_ADMIN_PASSWORD RESTART_TOKEN; do
        if [ -z "$(env_get "$key")" ]; then
            env_set "$key" "$(secret)"
        fi
    done
}
