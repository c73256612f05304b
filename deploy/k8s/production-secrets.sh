#!/usr/bin/env bash
# Makes the Secrets the production overlay's pods read, in NAMESPACE (default podway):
#
#   DATABASE_URL='postgresql+asyncpg://podway:PW@/podway?host=pg-a:5432&host=pg-b:5432&target_session_attrs=read-write' \
#   API_KEYS_FILE=api-keys.yaml deploy/k8s/production-secrets.sh podway
#
#   podway-database      url: DATABASE_URL
#   nats-passwords       NATS_<USER>_PASSWORD for every NATS user, random (none starts with a digit)
#   nats-routes          routes.conf: the route user and a random password, and the three routes using them
#   nats-route-tls       tls.crt, tls.key, ca.crt: a new CA and a certificate for *.nats-headless.NAMESPACE.svc.
#                        cluster.local, for server and client use (the routes verify each other). With
#                        cert-manager, make this Secret with a Certificate instead and set SKIP_ROUTE_TLS=1.
#   llm-router-api-keys  api-keys.yaml: API_KEYS_FILE, the policy's `api_keys` map
#
# Cloud credentials for the router are optional: a Secret llm-router-clouds (AWS_* variables) and
# llm-router-gcp (key.json), or the cluster's workload identity. With --dry-run the Secrets are printed
# (YAML), not applied. Needs kubectl and openssl. Run it once: running it again changes every password.
set -euo pipefail

namespace=${1:-podway}
dry_run=${2:-}
: "${DATABASE_URL:?set DATABASE_URL to the PostgreSQL URL (postgresql+asyncpg://...)}"
: "${API_KEYS_FILE:?set API_KEYS_FILE to a YAML file of the router policy\'s api_keys map}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

secret() {  # NAME ARGS...: the Secret, applied or (--dry-run) printed
  local name=$1; shift
  kubectl create secret generic "$name" --namespace "$namespace" "$@" --dry-run=client -o yaml > "$work/$name.yaml"
  if [ "$dry_run" = "--dry-run" ]; then echo "---"; cat "$work/$name.yaml"; else kubectl apply -f "$work/$name.yaml"; fi
}
password() { echo "p$(openssl rand -hex 16)"; }

secret podway-database --from-literal=url="$DATABASE_URL"

args=()
for user in ADMISSION SCHEDULER PREEMPTOR DRA_ALLOCATOR NODE_AGENT API_SERVER LLM_ROUTER CLIENT MIGRATE SYS; do
  args+=(--from-literal="NATS_${user}_PASSWORD=$(password)")
done
secret nats-passwords "${args[@]}"

route_password=$(password)
headless="nats-headless.$namespace.svc.cluster.local"
{
  printf 'authorization { user: route, password: "%s" }\nroutes: [\n' "$route_password"
  for i in 0 1 2; do printf '  nats-route://route:%s@nats-%d.%s:6222\n' "$route_password" "$i" "$headless"; done
  echo "]"
} > "$work/routes.conf"
secret nats-routes --from-file=routes.conf="$work/routes.conf"

if [ -z "${SKIP_ROUTE_TLS:-}" ]; then
  (
    cd "$work"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 3650 \
      -subj /CN=podway-nats-route-ca -keyout ca.key -out ca.crt 2>/dev/null
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=nats \
      -keyout tls.key -out tls.csr 2>/dev/null
    printf 'subjectAltName=DNS:*.%s\nextendedKeyUsage=serverAuth,clientAuth\n' "$headless" > ext.cnf
    openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 825 -extfile ext.cnf \
      -out tls.crt 2>/dev/null
  )
  secret nats-route-tls --from-file=tls.crt="$work/tls.crt" --from-file=tls.key="$work/tls.key" \
    --from-file=ca.crt="$work/ca.crt"
fi

secret llm-router-api-keys --from-file=api-keys.yaml="$API_KEYS_FILE"
