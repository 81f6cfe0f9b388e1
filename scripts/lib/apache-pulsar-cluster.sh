# shellcheck shell=bash
# The `cluster` and `run-cluster` commands of scripts/apache-pulsar (sourced by
# it; uses its fetch, classpath, free_ports, probe_connect, jvm_options,
# broker_common_conf, write_log4j, log and die).
#
# A local Apache Pulsar cluster on 127.0.0.1, one JVM per process:
#   zookeeper   the metadata store both brokers, the bookie and the proxy share
#               (ZooKeeperServerMain from the broker's own classpath)
#   bookie      one BookKeeper bookie
#   broker1/2   two brokers (PulsarBrokerStarter), each with its own ports
#   proxy       the Pulsar proxy ($PULSAR_PROXY_VERSION: the newest whose jar
#               Maven Central serves here), brokers found through ZooKeeper
# public/default gets $PULSAR_CLUSTER_BUNDLES bundles, spread over both brokers.
#
# Layout of DIR: DIR/<process>/{*.conf,*.log,pid,data/}, DIR/ports, DIR/env.

PULSAR_PROXY_VERSION=4.0.6
PROXY_CACHE="$CACHE/proxy-$PULSAR_PROXY_VERSION"
CLUSTER_NAME=pulsar-wire-cluster
CLUSTER_PROCESSES=(zookeeper bookie broker1 broker2 proxy)

# --------------------------------------------------------------------------
# fetch: the proxy's classpath
# --------------------------------------------------------------------------
# org.apache.pulsar:pulsar-proxy:4.0.7 is not on Maven Central here, and the
# 4.0.6 tree lacks jetcd-core-shaded and pulsar-opentelemetry at 4.0.6. The
# proxy jar itself is there: resolve it next to the 4.0.7 broker with its
# own Pulsar dependencies excluded, so it runs on the broker's 4.0.7 jars plus
# the few libraries only the proxy needs (jetty-proxy, ipaddress, ...).
proxy_classpath_lines() { sed "s#^@M2@#$M2#" "$PROXY_CACHE/classpath.txt"; }

fetch_proxy() {
  if [ -f "$PROXY_CACHE/.complete" ] && [ -s "$PROXY_CACHE/classpath.txt" ]; then
    local jar missing=""
    while IFS= read -r jar; do [ -f "$jar" ] || missing=1; done < <(proxy_classpath_lines)
    [ -z "$missing" ] && return 0
  fi
  fetch
  mkdir -p "$PROXY_CACHE"
  rm -f "$PROXY_CACHE/.complete"
  cp "$CACHE/settings.xml" "$PROXY_CACHE/settings.xml"
  cat >"$PROXY_CACHE/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>pulsar-wire.test</groupId>
  <artifactId>apache-pulsar-proxy</artifactId>
  <version>$PULSAR_PROXY_VERSION</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.pulsar</groupId>
      <artifactId>pulsar-broker</artifactId>
      <version>$PULSAR_VERSION</version>
    </dependency>
    <dependency>
      <groupId>org.apache.pulsar</groupId>
      <artifactId>pulsar-proxy</artifactId>
      <version>$PULSAR_PROXY_VERSION</version>
      <exclusions>
        <exclusion><groupId>org.apache.pulsar</groupId><artifactId>*</artifactId></exclusion>
      </exclusions>
    </dependency>
  </dependencies>
</project>
EOF
  local -a mvn_args=(-B -q -s settings.xml -Dmaven.repo.local="$M2"
    org.apache.maven.plugins:maven-dependency-plugin:3.6.1:build-classpath
    -DincludeScope=runtime -Dmdep.outputFile=classpath.tmp -Dmdep.localRepoProperty=@M2@)
  if ! (cd "$PROXY_CACHE" && mvn -o "${mvn_args[@]}" >"$PROXY_CACHE/mvn.log" 2>&1); then
    log "fetching org.apache.pulsar:pulsar-proxy:$PULSAR_PROXY_VERSION into $M2"
    if ! (cd "$PROXY_CACHE" && mvn "${mvn_args[@]}" >"$PROXY_CACHE/mvn.log" 2>&1); then
      tail -n 40 "$PROXY_CACHE/mvn.log" >&2
      die "Maven could not resolve pulsar-proxy $PULSAR_PROXY_VERSION (full log: $PROXY_CACHE/mvn.log)"
    fi
  fi
  tr ':' '\n' <"$PROXY_CACHE/classpath.tmp" | grep -v '^$' >"$PROXY_CACHE/classpath.txt"
  rm -f "$PROXY_CACHE/classpath.tmp"
  grep -q "pulsar-proxy-$PULSAR_PROXY_VERSION.jar" "$PROXY_CACHE/classpath.txt" \
    || die "no pulsar-proxy jar in $PROXY_CACHE/classpath.txt"
  echo "pulsar-proxy $PULSAR_PROXY_VERSION on pulsar-broker $PULSAR_VERSION" >"$PROXY_CACHE/.complete"
}

# --------------------------------------------------------------------------
# processes
# --------------------------------------------------------------------------
# A process of the cluster in DIR is recognised by its config file path, which
# is on its command line: DIR/<name>/<name>.conf.
is_ours() {  # PID DIR NAME
  local cmd
  cmd=$( { tr '\0' ' ' <"/proc/$1/cmdline"; } 2>/dev/null) || return 1
  [[ "$cmd" == *" $2/$3/$3.conf"* ]]
}

proc_pid() {  # DIR NAME: the recorded pid if that process is alive, else nothing
  local pid
  pid=$(cat "$1/$2/pid" 2>/dev/null) || return 0
  if is_ours "$pid" "$1" "$2"; then echo "$pid"; fi
}

# Starts java in its own session (not a group leader here, so setsid execs
# java and $! is java's pid), output appended to DIR/NAME/NAME.log.
spawn() {  # DIR NAME HEAP DIRECT CLASSPATH MAIN [ARGS...]
  local dir=$1 name=$2 heap=$3 direct=$4 cp=$5 main=$6
  shift 6
  local -a jvm
  jvm_options "$heap" "$direct" "$dir/log4j2.xml"
  (cd "$dir/$name" && exec setsid java "${jvm[@]}" -cp "$cp" "$main" "$@" \
      </dev/null >>"$dir/$name/$name.log" 2>&1) &
  echo $! >"$dir/$name/pid"
}

# SIGTERM (or SIGKILL with -9), then wait until the process is gone;
# SIGKILL after ~20 s if SIGTERM was not enough.
stop_proc() {  # DIR NAME [-9]
  local dir=$1 name=$2 signal=${3:-TERM} pid _
  pid=$(proc_pid "$dir" "$name")
  [ -n "$pid" ] || { rm -f "$dir/$name/pid"; return 0; }
  [ "$signal" = -9 ] && signal=KILL
  kill -"$signal" "$pid" 2>/dev/null || true
  for _ in $(seq 1 200); do
    is_ours "$pid" "$dir" "$name" || break
    sleep 0.1
  done
  if is_ours "$pid" "$dir" "$name"; then
    log "$name ($pid) did not stop within 20 s; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  for _ in $(seq 1 100); do
    [ -e "/proc/$pid" ] || break
    if [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" = Z ]; then
      wait "$pid" 2>/dev/null || true
    fi
    sleep 0.1
  done
  [ ! -e "/proc/$pid" ] || die "$name ($pid) is still there"
  rm -f "$dir/$name/pid"
}

alive_or_die() {  # DIR NAME
  [ -n "$(proc_pid "$1" "$2")" ] && return 0
  log "$2 exited during start-up; last lines of $1/$2/$2.log:"
  tail -n 60 "$1/$2/$2.log" >&2
  return 1
}

# --------------------------------------------------------------------------
# configuration
# --------------------------------------------------------------------------
load_ports() {  # DIR: sets ZK_PORT BOOKIE_PORT BROKER{1,2}_PORT WEB{1,2}_PORT PROXY_PORT PROXY_WEB_PORT
  [ -f "$1/ports" ] || die "no cluster in $1 (no $1/ports)"
  # shellcheck disable=SC1091
  . "$1/ports"
}

metadata_url() { echo "zk:127.0.0.1:$ZK_PORT"; }

# PULSAR_CLUSTER_LOAD_MANAGER=extensible: the extensible load manager (PIP-192)
# instead of the default modular one. Its brokers name the new owner when
# they close a moved topic's producers and consumers.
load_manager_conf() {
  case "${PULSAR_CLUSTER_LOAD_MANAGER:-modular}" in
    modular) ;;
    extensible)
      echo "loadManagerClassName=org.apache.pulsar.broker.loadbalance.extensions.ExtensibleLoadManagerImpl"
      echo "loadBalancerLoadSheddingStrategy=org.apache.pulsar.broker.loadbalance.extensions.scheduler.TransferShedder"
      ;;
    *) die "PULSAR_CLUSTER_LOAD_MANAGER must be modular or extensible, not $PULSAR_CLUSTER_LOAD_MANAGER" ;;
  esac
}

write_cluster_config() {  # DIR
  local dir=$1 n
  write_log4j "$dir/log4j2.xml"
  mkdir -p "$dir/zookeeper/data" "$dir/bookie/data" "$dir/broker1" "$dir/broker2" "$dir/proxy"

  cat >"$dir/zookeeper/zookeeper.conf" <<EOF
# Written by scripts/apache-pulsar: the cluster's metadata store.
tickTime=1000
dataDir=$dir/zookeeper/data
clientPort=$ZK_PORT
clientPortAddress=127.0.0.1
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=ruok
EOF

  cat >"$dir/bookie/bookie.conf" <<EOF
# Written by scripts/apache-pulsar: the cluster's one bookie.
bookiePort=$BOOKIE_PORT
advertisedAddress=127.0.0.1
listeningInterface=lo
allowLoopback=true
useHostNameAsBookieID=false
metadataServiceUri=zk+null://127.0.0.1:$ZK_PORT/ledgers
zkTimeout=10000
journalDirectories=$dir/bookie/data/journal
ledgerDirectories=$dir/bookie/data/ledgers
httpServerEnabled=false
autoRecoveryDaemonEnabled=false
enableStatistics=false
journalSyncData=false
journalPreAllocSizeMB=1
# Smaller in-memory tables than the defaults (64 MB) for a small heap.
skipListSizeLimit=16777216
# CI disks may be nearly full; don't let the bookie turn read-only.
diskUsageThreshold=0.999
diskUsageWarnThreshold=0.998
EOF

  for n in 1 2; do
    local bport wport
    bport=$(eval echo "\$BROKER${n}_PORT")
    wport=$(eval echo "\$WEB${n}_PORT")
    cat >"$dir/broker$n/broker$n.conf" <<EOF
# Written by scripts/apache-pulsar: broker $n of a two-broker cluster.

### Network: loopback only
clusterName=$CLUSTER_NAME
metadataStoreUrl=$(metadata_url)
configurationMetadataStoreUrl=$(metadata_url)
bindAddress=127.0.0.1
advertisedAddress=127.0.0.1
brokerServicePort=$bport
webServicePort=$wport
functionsWorkerEnabled=false

$(broker_common_conf)

### Cluster
# A killed broker's bundles go to the survivor once its ZooKeeper session
# expires: 5 s instead of 30 s.
metadataStoreSessionTimeoutMillis=5000
# Bundles move only when asked (admin unload/split, a broker's death): no
# automatic shedding or splitting that would move topics under a test.
loadBalancerSheddingEnabled=false
loadBalancerAutoBundleSplitEnabled=false
loadBalancerAutoUnloadSplitBundlesEnabled=false
$(load_manager_conf)
EOF
    if [ -n "${PULSAR_CONF_OVERRIDES:-}" ]; then
      printf '\n### From PULSAR_CONF_OVERRIDES (later keys win)\n%s\n' "$PULSAR_CONF_OVERRIDES" \
        >>"$dir/broker$n/broker$n.conf"
    fi
  done

  cat >"$dir/proxy/proxy.conf" <<EOF
# Written by scripts/apache-pulsar: the Pulsar proxy in front of both brokers.
clusterName=$CLUSTER_NAME
metadataStoreUrl=$(metadata_url)
configurationMetadataStoreUrl=$(metadata_url)
bindAddress=127.0.0.1
advertisedAddress=127.0.0.1
servicePort=$PROXY_PORT
webServicePort=$PROXY_WEB_PORT
# The brokers listen on random ports (the default allows 6650 and 6651 only).
brokerProxyAllowedTargetPorts=*
numIOThreads=2
numAcceptorThreads=1
maxMessageSize=5242880
EOF
}

# --------------------------------------------------------------------------
# start / stop of one process
# --------------------------------------------------------------------------
start_broker_process() {  # DIR N
  spawn "$1" "broker$2" "${PULSAR_HEAP:-384m}" "${PULSAR_DIRECT_MEMORY:-256m}" "$(classpath)" \
    org.apache.pulsar.PulsarBrokerStarter --broker-conf "$1/broker$2/broker$2.conf"
}

broker_ready() {  # N: answers CONNECT, and its admin API says it is ready
  local bport wport
  bport=$(eval echo "\$BROKER${1}_PORT")
  wport=$(eval echo "\$WEB${1}_PORT")
  probe_connect "$bport" >/dev/null 2>&1 \
    && curl -fsS --max-time 5 "http://127.0.0.1:$wport/admin/v2/brokers/ready" 2>/dev/null | grep -q ok
}

wait_until() {  # DEADLINE WHAT DIR PROCESS... -- CHECK [ARGS]: poll CHECK while the processes live
  local deadline=$1 what=$2 dir=$3
  shift 3
  local -a procs=()
  while [ "$1" != -- ]; do procs+=("$1"); shift; done
  shift
  local p
  while ! "$@"; do
    for p in "${procs[@]}"; do alive_or_die "$dir" "$p" || return 1; done
    if [ "$SECONDS" -ge "$deadline" ]; then
      log "$what not ready after ${PULSAR_START_TIMEOUT:-240} s"
      for p in "${procs[@]}"; do
        log "last lines of $dir/$p/$p.log:"
        tail -n 30 "$dir/$p/$p.log" >&2
      done
      return 1
    fi
    sleep 0.5
  done
}

zookeeper_ready() {
  python3 - "$ZK_PORT" <<'EOF'
import socket, sys
try:
    with socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2) as s:
        s.sendall(b"ruok")
        sys.exit(0 if s.recv(4) == b"imok" else 1)
except OSError:
    sys.exit(1)
EOF
}

admin() {  # PORT METHOD PATH: a REST call that follows redirects to the owner/leader
  curl -fsS -L --max-time 30 -X "$2" -H 'Content-Type: application/json' "http://127.0.0.1:$1$3"
}

# Counts public/default bundles each broker owns: prints "N1 N2".
owned_bundles() {
  local n count out=""
  for n in 1 2; do
    count=$(admin "$(eval echo "\$WEB${n}_PORT")" GET \
        "/admin/v2/brokers/$CLUSTER_NAME/127.0.0.1:$(eval echo "\$WEB${n}_PORT")/ownedNamespaces" 2>/dev/null \
      | python3 -c 'import json,sys; print(sum(1 for k in json.load(sys.stdin) if k.startswith("public/default/")))' \
      2>/dev/null) || count=0
    out="$out ${count:-0}"
  done
  echo "$out"
}

# Looks up topics until both brokers own bundles of public/default: lookups
# of unowned bundles make the load manager assign them, and it spreads the
# bundles of one namespace over the brokers.
both_own_bundles() {
  local i
  for i in $(seq 0 31); do
    curl -fsS -L --max-time 20 \
      "http://127.0.0.1:$WEB1_PORT/lookup/v2/topic/persistent/public/default/cluster-probe-$i" \
      >/dev/null 2>&1 || return 1
  done
  local a b
  read -r a b < <(owned_bundles)
  [ "${a:-0}" -gt 0 ] && [ "${b:-0}" -gt 0 ]
}

# The proxy answers CONNECT and forwards an admin lookup to a broker.
proxy_ready() {
  probe_connect "$PROXY_PORT" >/dev/null 2>&1 \
    && curl -fsS --max-time 10 \
      "http://127.0.0.1:$PROXY_WEB_PORT/lookup/v2/topic/persistent/public/default/cluster-probe-0" \
      2>/dev/null | grep -q brokerUrl
}

write_cluster_env() {  # DIR
  local dir=$1
  cat >"$dir/env.tmp" <<EOF
PULSAR_SERVICE_URL=pulsar://127.0.0.1:$BROKER1_PORT
PULSAR_ADMIN_URL=http://127.0.0.1:$WEB1_PORT
PULSAR_SERVICE_URL_2=pulsar://127.0.0.1:$BROKER2_PORT
PULSAR_ADMIN_URL_2=http://127.0.0.1:$WEB2_PORT
PULSAR_PROXY_URL=pulsar://127.0.0.1:$PROXY_PORT
PULSAR_PROXY_ADMIN_URL=http://127.0.0.1:$PROXY_WEB_PORT
PULSAR_CLUSTER_DIR=$dir
PULSAR_CLUSTER_LOAD_MANAGER=${PULSAR_CLUSTER_LOAD_MANAGER:-modular}
PULSAR_ZOOKEEPER_PID=$(cat "$dir/zookeeper/pid" 2>/dev/null)
PULSAR_BOOKIE_PID=$(cat "$dir/bookie/pid" 2>/dev/null)
PULSAR_BROKER_1_PID=$(cat "$dir/broker1/pid" 2>/dev/null)
PULSAR_BROKER_2_PID=$(cat "$dir/broker2/pid" 2>/dev/null)
PULSAR_PROXY_PID=$(cat "$dir/proxy/pid" 2>/dev/null)
EOF
  mv "$dir/env.tmp" "$dir/env"
}

# --------------------------------------------------------------------------
# cluster start / stop
# --------------------------------------------------------------------------
CLUSTER_STARTING=""
cluster_start_cleanup() {  # EXIT trap while starting: stop whatever started
  local rc=$?
  trap - EXIT
  if [ -n "$CLUSTER_STARTING" ] && [ "$rc" != 0 ]; then
    log "start-up failed; stopping what was started in $CLUSTER_STARTING"
    cluster_stop "$CLUSTER_STARTING" || true
  fi
  exit "$rc"
}

cluster_start() {
  local dir=${1:?usage: apache-pulsar cluster start DIR}
  command -v python3 >/dev/null || die "python3 not found"
  load_manager_conf >/dev/null  # an unknown value stops here
  fetch
  fetch_proxy
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  local p
  for p in "${CLUSTER_PROCESSES[@]}"; do
    [ -z "$(proc_pid "$dir" "$p")" ] || die "a cluster is already running in $dir ($p)"
  done
  # Always a fresh cluster: old bookie cookies and metadata would pin old ports.
  rm -rf "${dir:?}"/{zookeeper,bookie,broker1,broker2,proxy} "$dir/env" "$dir/ports"
  CLUSTER_STARTING=$dir
  trap cluster_start_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM

  read -r ZK_PORT BOOKIE_PORT BROKER1_PORT WEB1_PORT BROKER2_PORT WEB2_PORT PROXY_PORT PROXY_WEB_PORT \
    < <(free_ports 8)
  cat >"$dir/ports" <<EOF
ZK_PORT=$ZK_PORT
BOOKIE_PORT=$BOOKIE_PORT
BROKER1_PORT=$BROKER1_PORT
WEB1_PORT=$WEB1_PORT
BROKER2_PORT=$BROKER2_PORT
WEB2_PORT=$WEB2_PORT
PROXY_PORT=$PROXY_PORT
PROXY_WEB_PORT=$PROXY_WEB_PORT
EOF
  write_cluster_config "$dir"
  local cp; cp=$(classpath)
  local t0; t0=$(date +%s.%N)
  local deadline=$((SECONDS + ${PULSAR_START_TIMEOUT:-240}))

  spawn "$dir" zookeeper 96m 32m "$cp" \
    org.apache.zookeeper.server.ZooKeeperServerMain "$dir/zookeeper/zookeeper.conf"
  wait_until "$deadline" zookeeper "$dir" zookeeper -- zookeeper_ready

  # Cluster, tenant and namespace metadata, and BookKeeper's ledger layout.
  # (cd: the JVM runs in its own directory so its stray files land there.)
  local -a jvm
  jvm_options 128m 32m "$dir/log4j2.xml"
  mkdir -p "$dir/setup"
  if ! (cd "$dir/setup" && java "${jvm[@]}" -cp "$cp" org.apache.pulsar.PulsarClusterMetadataSetup \
      --cluster "$CLUSTER_NAME" \
      --metadata-store "$(metadata_url)" \
      --configuration-metadata-store "$(metadata_url)" \
      --web-service-url "http://127.0.0.1:$WEB1_PORT" \
      --broker-service-url "pulsar://127.0.0.1:$BROKER1_PORT" \
      --default-namespace-bundle-number "${PULSAR_CLUSTER_BUNDLES:-8}" \
      --zookeeper-session-timeout-ms 10000 \
      </dev/null >"$dir/setup/setup.log" 2>&1); then
    tail -n 40 "$dir/setup/setup.log" >&2
    die "cluster metadata set-up failed (log: $dir/setup/setup.log)"
  fi

  spawn "$dir" bookie "${PULSAR_BOOKIE_HEAP:-256m}" 256m "$cp" \
    org.apache.bookkeeper.server.Main --conf "$dir/bookie/bookie.conf"
  start_broker_process "$dir" 1
  start_broker_process "$dir" 2
  # The proxy's own classpath does not match the class-data archive.
  PULSAR_CDS=0 spawn "$dir" proxy 192m 128m "$(proxy_classpath_lines | paste -sd: -)" \
    org.apache.pulsar.proxy.server.ProxyServiceStarter --config "$dir/proxy/proxy.conf"

  wait_until "$deadline" "broker 1" "$dir" bookie broker1 broker2 proxy -- broker_ready 1
  wait_until "$deadline" "broker 2" "$dir" bookie broker1 broker2 proxy -- broker_ready 2
  wait_until "$deadline" "bundles on both brokers" "$dir" bookie broker1 broker2 proxy -- both_own_bundles
  wait_until "$deadline" proxy "$dir" proxy -- proxy_ready
  local t1; t1=$(date +%s.%N)

  write_cluster_env "$dir"
  CLUSTER_STARTING=""
  trap - EXIT INT TERM
  local a b
  read -r a b < <(owned_bundles)
  log "Apache Pulsar $PULSAR_VERSION cluster (proxy $PULSAR_PROXY_VERSION) ready in" \
    "$(python3 -c "print(round($t1 - $t0, 1))") s; public/default bundles owned: broker 1 $a, broker 2 $b"
  cat "$dir/env"
}

cluster_stop() {
  local dir=${1:?usage: apache-pulsar cluster stop DIR}
  [ -d "$dir" ] || die "no such directory: $dir"
  dir=$(cd "$dir" && pwd)
  # Proxy and brokers together (each broker's shutdown takes a few seconds),
  # then the bookie, then the metadata store they all use.
  local p rc=0
  local -a pids=()
  for p in proxy broker1 broker2; do
    stop_proc "$dir" "$p" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  stop_proc "$dir" bookie || rc=1
  stop_proc "$dir" zookeeper || rc=1
  return "$rc"
}

# kill -9 broker N: no shutdown at all, as when its machine dies.
cluster_kill_broker() {
  local dir=${1:?usage: apache-pulsar cluster kill-broker DIR N} n=${2:?broker number (1 or 2)}
  dir=$(cd "$dir" && pwd)
  [[ "$n" == [12] ]] || die "broker number must be 1 or 2, not $n"
  [ -n "$(proc_pid "$dir" "broker$n")" ] || die "broker $n is not running in $dir"
  stop_proc "$dir" "broker$n" -9
  load_ports "$dir"
  write_cluster_env "$dir"
  log "broker $n killed (SIGKILL)"
}

# Starts broker N again on its ports and config; waits until it is ready.
cluster_start_broker() {
  local dir=${1:?usage: apache-pulsar cluster start-broker DIR N} n=${2:?broker number (1 or 2)}
  dir=$(cd "$dir" && pwd)
  [[ "$n" == [12] ]] || die "broker number must be 1 or 2, not $n"
  [ -z "$(proc_pid "$dir" "broker$n")" ] || die "broker $n is already running in $dir"
  load_ports "$dir"
  local t0=$SECONDS deadline=$((SECONDS + ${PULSAR_START_TIMEOUT:-240}))
  echo "--- restart $(date +%T)" >>"$dir/broker$n/broker$n.log"
  start_broker_process "$dir" "$n"
  if ! wait_until "$deadline" "broker $n" "$dir" "broker$n" -- broker_ready "$n"; then
    stop_proc "$dir" "broker$n" -9
    die "broker $n did not start again"
  fi
  write_cluster_env "$dir"
  log "broker $n ready again in $((SECONDS - t0)) s"
}

cluster_restart_broker() {
  cluster_kill_broker "$@"
  cluster_start_broker "$@"
}

# --------------------------------------------------------------------------
# run-cluster
# --------------------------------------------------------------------------
CLUSTER_RUN_DIR=""
cluster_run_cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [ -n "$CLUSTER_RUN_DIR" ]; then
    cluster_stop "$CLUSTER_RUN_DIR" || true
    if [ "${PULSAR_KEEP_DIR:-}" = 1 ]; then
      log "kept $CLUSTER_RUN_DIR"
    else
      rm -rf "$CLUSTER_RUN_DIR"
    fi
  fi
  exit "$rc"
}

cluster_run() {
  [ "${1:-}" = "--" ] && shift
  [ $# -gt 0 ] || die "usage: apache-pulsar run-cluster -- CMD [ARGS...]"
  fetch
  fetch_proxy
  CLUSTER_RUN_DIR=$(mktemp -d "${TMPDIR:-/tmp}/apache-pulsar-cluster.XXXXXX")
  local dir=$CLUSTER_RUN_DIR
  # A subshell: cluster_start's own traps stay inside it.
  (cluster_start "$dir" >/dev/null) || { local rc=$?; rm -rf "$dir"; exit "$rc"; }
  trap cluster_run_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  set -a
  # shellcheck disable=SC1091
  . "$dir/env"
  set +a
  local rc=0
  "$@" || rc=$?
  exit "$rc"
}

cluster_main() {
  case "${1:-}" in
    start) shift; cluster_start "$@" ;;
    stop) shift; cluster_stop "$@" ;;
    kill-broker) shift; cluster_kill_broker "$@" ;;
    start-broker) shift; cluster_start_broker "$@" ;;
    restart-broker) shift; cluster_restart_broker "$@" ;;
    *) die "usage: apache-pulsar cluster start|stop DIR, cluster kill-broker|start-broker|restart-broker DIR N" ;;
  esac
}
