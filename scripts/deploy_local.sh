#!/usr/bin/env bash
# Brings up the deployment of docs/DEPLOY.md on localhost: one Redis, REPLICAS (default 2)
# `geist serve` replicas sharing it, and HAProxy in front routing by prompt_cache_key / session
# id with consistent hashing. Shows it working (requests through the balancer, a prefix hit
# from RAM on its own replica, from Redis on another, a replica stopped and its traffic served
# warm by the others), prints each replica's tier counters, and tears everything down.
# Bounded: every process runs under `timeout`, the whole script under DEPLOY_TIMEOUT (300 s).
#
# Usage: scripts/deploy_local.sh [MODEL.gguf]
#   MODEL defaults to the fixtures' stories260K.gguf, else a `geist mkmodel --preset
#   tiny-llama` file written to the temp dir. GEIST_BIN (default build/dev/bin/geist).
set -euo pipefail
if [ -z "${GEIST_DEPLOY_INNER:-}" ]; then  # the whole run, bounded
  GEIST_DEPLOY_INNER=1 exec timeout "${DEPLOY_TIMEOUT:-300}" "$0" "$@"
fi
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${GEIST_BIN:-$root/build/dev/bin/geist}"
replicas="${REPLICAS:-2}"
limit="${DEPLOY_TIMEOUT:-300}"
fixtures="${GEIST_FIXTURES:-$root/../shared/fixtures}"
for tool in redis-server haproxy curl jq; do
  command -v "$tool" >/dev/null || { echo "deploy_local: $tool is missing (scripts/install_deps.sh)" >&2; exit 1; }
done
[ -x "$bin" ] || { echo "deploy_local: no geist binary at $bin (build it, or set GEIST_BIN)" >&2; exit 1; }

work="$(mktemp -d /tmp/geist-deploy-XXXXXX)"
pids=()
teardown() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
  echo "== torn down (redis, $replicas replicas, haproxy stopped; $work removed)"
}
trap teardown EXIT
trap 'echo "deploy_local: stopped (time limit or signal)" >&2; exit 124' TERM INT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_http() {  # URL: until it answers 200, at most 30 s
  for _ in $(seq 300); do curl -fs --max-time 5 -o /dev/null "$1" && return 0; sleep 0.1; done
  echo "deploy_local: $1 did not come up" >&2; return 1
}

model="${1:-}"
if [ -z "$model" ]; then
  if [ -f "$fixtures/models/stories260K.gguf" ]; then
    model="$fixtures/models/stories260K.gguf"
  else
    model="$work/tiny-llama.gguf"
    timeout 60 "$bin" mkmodel --preset tiny-llama --type f32 -o "$model" >/dev/null
  fi
fi
echo "== model: $model"

# Redis: a password (passed to geist through $GEIST_REDIS_PASSWORD, not on the command line),
# bounded memory, LRU eviction over keys that all carry a TTL, no persistence (a cache).
redis_port="$(free_port)"
export GEIST_REDIS_PASSWORD="deploy-$RANDOM$RANDOM"
timeout "$limit" redis-server --bind 127.0.0.1 --port "$redis_port" --requirepass "$GEIST_REDIS_PASSWORD" \
  --maxmemory 512mb --maxmemory-policy volatile-lru --save '' --appendonly no \
  --dir "$work" --logfile "$work/redis.log" &
pids+=($!)
for _ in $(seq 100); do
  [ "$(REDISCLI_AUTH="$GEIST_REDIS_PASSWORD" redis-cli -p "$redis_port" ping 2>/dev/null)" = PONG ] && break
  sleep 0.1
done
echo "== redis on 127.0.0.1:$redis_port"

servers=""
declare -a ports
for i in $(seq 1 "$replicas"); do
  ports[$i]="$(free_port)"
  timeout "$limit" "$bin" serve -m "$model" --port "${ports[$i]}" -t 1 --ctx 1024 \
    --redis "redis://127.0.0.1:$redis_port" --park-after 2 2>"$work/replica$i.log" &
  pids+=($!)
  servers+="    server replica$i 127.0.0.1:${ports[$i]} check inter 500ms fall 2 rise 2"$'\n'
done
for i in $(seq 1 "$replicas"); do wait_http "http://127.0.0.1:${ports[$i]}/health"; done
echo "== $replicas replicas on ports ${ports[*]}"

lb_port="$(free_port)"
sed -e "s/@LB_PORT@/$lb_port/" "$root/docs/deploy/haproxy.cfg" |
  awk -v servers="$servers" '/@SERVERS@/ { printf "%s", servers; next } { print }' >"$work/haproxy.cfg"
haproxy -c -q -f "$work/haproxy.cfg"
timeout "$limit" haproxy -db -f "$work/haproxy.cfg" >"$work/haproxy.log" 2>&1 &
pids+=($!)
wait_http "http://127.0.0.1:$lb_port/health"
echo "== haproxy on 127.0.0.1:$lb_port (balance hash on prompt_cache_key / session id, consistent)"

system='You are a storyteller. Tell short, happy stories about the sea, its fish and its boats. '
system="$system$system$system$system"
tier_hits() {  # replica index -> its geist_cache_tier_hits_total (empty when stopped)
  curl -s --max-time 5 "http://127.0.0.1:${ports[$1]}/metrics" 2>/dev/null |
    awk '$1=="geist_cache_tier_hits_total" {print $2}' || true
}
replica_of() { tr -d '\r' <"$work/h" | awk -F': ' 'tolower($1)=="x-geist-replica" {print $2}'; }
# ask KEY USER: one chat request through the balancer; prints the replica that answered, the
# cached tokens and where they came from (its RAM, or Redis: its tier-hit counter moved).
ask() {
  local body out before=() i from
  for i in $(seq 1 "$replicas"); do before[$i]="$(tier_hits "$i")"; done
  body="$(jq -nc --arg s "$system" --arg u "$2" --arg k "$1" \
    '{messages:[{role:"system",content:$s},{role:"user",content:$u}],max_tokens:12,temperature:0,prompt_cache_key:$k}')"
  out="$(curl -s --max-time 30 -D "$work/h" -H 'Content-Type: application/json' -d "$body" "http://127.0.0.1:$lb_port/v1/chat/completions")"
  last_replica="$(replica_of)"
  last_text="$(jq -r '.choices[0].message.content' <<<"$out")"
  local cached; cached="$(jq -r .usage.prompt_tokens_details.cached_tokens <<<"$out")"
  i="${last_replica#replica}"
  from="-"
  if [ "$cached" != 0 ]; then
    from="RAM"; [ "$(tier_hits "$i")" != "${before[$i]}" ] && from="Redis"
  fi
  printf '   key=%-7s -> %-9s prompt=%-4s cached=%-4s from=%-6s text=%s\n' "$1" "$last_replica" \
    "$(jq -r .usage.prompt_tokens <<<"$out")" "$cached" "$from" "$(jq -c '.choices[0].message.content' <<<"$out")"
}

echo "== 1. the same key twice: the same replica, the second a RAM hit"
ask user-1 "A whale."
first_replica="$last_replica"; first_text="$last_text"
ask user-1 "A whale."
echo "== 2. other keys, other questions, spread over the replicas: the shared system prompt"
echo "      comes from Redis on a replica that has not computed it yet, from RAM after that"
n=2
for q in "A crab." "A gull." "A boat." "An eel." "A seal." "A reef."; do
  ask "user-$n" "$q"; n=$((n + 1))
done
echo "== 3. a session, created through the balancer on $first_replica (routed by its id), parked"
sid=""
for k in $(seq 1 50); do
  try="story-$k"
  curl -s --max-time 30 -D "$work/h" -o "$work/created" -H 'Content-Type: application/json' \
    -d "$(jq -nc --arg s "$system" --arg id "$try" '{id:$id,messages:[{role:"system",content:$s},{role:"user",content:"Once upon a time"}]}')" \
    "http://127.0.0.1:$lb_port/v1/sessions"
  if [ "$(replica_of)" = "$first_replica" ]; then sid="$try"; break; fi
  curl -s --max-time 5 -o /dev/null -X DELETE "http://127.0.0.1:$lb_port/v1/sessions/$try"
done
echo "   created: $(jq -c '{id, n_tokens, state_bytes}' "$work/created") on $first_replica"
for _ in $(seq 100); do
  [ "$(curl -s --max-time 5 "http://127.0.0.1:$lb_port/v1/sessions/$sid" | jq -r .parked)" = true ] && break
  sleep 0.2
done
echo "   parked: $(curl -s --max-time 5 "http://127.0.0.1:$lb_port/v1/sessions/$sid" | jq -c '{id, parked}')"
echo "== 4. $first_replica stopped: its keys and its session move to the others, served from Redis"
idx="${first_replica#replica}"
kill "${pids[$idx]}" 2>/dev/null || true
sleep 1.5  # two failed health checks (inter 500ms, fall 2)
ask user-1 "A whale."
[ "$last_text" = "$first_text" ] && echo "   identical to what $first_replica answered before: yes"
out="$(curl -s --max-time 30 -D "$work/h" -H 'Content-Type: application/json' \
  -d '{"messages":[{"role":"user","content":"What happened next?"}],"max_tokens":8,"temperature":0}' \
  "http://127.0.0.1:$lb_port/v1/sessions/$sid/chat/completions")"
echo "   session $sid continued on $(replica_of): $(jq -c '{text: .choices[0].message.content, cached: .usage.prompt_tokens_details.cached_tokens}' <<<"$out")"

echo "== tier counters (redis) per replica"
for i in $(seq 1 "$replicas"); do
  m="$(curl -s --max-time 30 "http://127.0.0.1:${ports[$i]}/metrics" 2>/dev/null || true)"
  if [ -z "$m" ]; then echo "   replica$i: stopped"; continue; fi
  printf '   replica%s: ' "$i"
  for f in geist_tier_gets_total geist_tier_hits_total geist_tier_puts_total geist_tier_corrupt_total geist_tier_available; do
    printf '%s=%s ' "${f#geist_tier_}" "$(awk -v f="$f{tier=\"redis\"}" '$1==f {print $2}' <<<"$m")"
  done
  printf 'cached_tokens_total=%s sessions_from_tier=%s\n' "$(awk '$1=="geist_cached_tokens_total" {print $2}' <<<"$m")" \
    "$(awk '$1=="geist_sessions_from_tier_total" {print $2}' <<<"$m")"
done
echo "== redis: $(REDISCLI_AUTH="$GEIST_REDIS_PASSWORD" redis-cli -p "$redis_port" dbsize) keys, $(REDISCLI_AUTH="$GEIST_REDIS_PASSWORD" redis-cli -p "$redis_port" info memory | awk -F: '/^used_memory_human/ {print $2}' | tr -d '\r') used"
