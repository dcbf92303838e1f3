#!/usr/bin/env bash
# A Spark standalone cluster (master and/or worker) from the project's installed pyspark.
#
#   bash scripts/spark_standalone.sh start                    # master + one worker on this machine
#   bash scripts/spark_standalone.sh start-master             # the master only
#   bash scripts/spark_standalone.sh start-worker MASTER_URL  # a worker of the master at MASTER_URL
#   bash scripts/spark_standalone.sh status | stop     # stop: also removes the executors' environments
#
# Why: pip's pyspark ships bin/spark-class but not Spark's sbin/start-master.sh / start-worker.sh,
# and Spark's default worker directory would be pyspark/work inside the venv. This starts the same
# Master and Worker classes through bin/spark-class, each detached in a session of its own (so that
# `stop` ends exactly them and everything they started: executors, Python workers), with the
# worker, log and conf directories outside the venv and the checkout.
#
# Environment (defaults in brackets):
#   SPARK_HOST               address to bind and advertise [127.0.0.1]; for a cluster of several
#                            machines, this machine's address on the network the others reach
#   SPARK_MASTER_PORT        [7077]    SPARK_MASTER_WEBUI_PORT [8080]   SPARK_WORKER_WEBUI_PORT [8081]
#   SPARK_WORKER_CORES       [all cores]                              SPARK_WORKER_MEMORY [2g]
#   RMQSIM_SPARK_DIR         state: work/ (SPARK_WORKER_DIR, executor logs), logs/, conf/
#                            (SPARK_CONF_DIR), envs/ (the executors' unpacked Python environments,
#                            one per content, reused by every sweep: analysis/sweeps/executor_boot.py),
#                            *.pid [${XDG_STATE_HOME:-~/.local/state}/rmqsim-spark]
#   PYTHON                   the interpreter whose pyspark is used [<repo>/.venv/bin/python]
#   JAVA_HOME                else the `java` on PATH
#   SPARK_WAIT_S             how long start-* wait for the master / the worker's registration [90]
# A standalone master runs whatever any client that reaches its port submits: keep it on
# 127.0.0.1, or on a network only trusted machines reach.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=${PYTHON:-$ROOT/.venv/bin/python}
HOST=${SPARK_HOST:-127.0.0.1}
MASTER_PORT=${SPARK_MASTER_PORT:-7077}
MASTER_WEBUI=${SPARK_MASTER_WEBUI_PORT:-8080}
WORKER_WEBUI=${SPARK_WORKER_WEBUI_PORT:-8081}
STATE=${RMQSIM_SPARK_DIR:-${XDG_STATE_HOME:-$HOME/.local/state}/rmqsim-spark}
WAIT_S=${SPARK_WAIT_S:-90}

die() { echo "spark_standalone: $*" >&2; exit 1; }

setup() {
  [[ -x $PY ]] || die "no Python at $PY (run scripts/setup.sh, or set PYTHON)"
  SPARK_HOME=$("$PY" -c 'import pyspark,os;print(os.path.dirname(pyspark.__file__))') \
    || die "$PY has no pyspark"
  [[ -n ${JAVA_HOME:-} ]] || command -v java >/dev/null || die "no Java: set JAVA_HOME or put java on PATH"
  command -v setsid >/dev/null || die "setsid (util-linux) is needed"
  mkdir -p "$STATE/work" "$STATE/logs" "$STATE/conf"
  STATE=$(cd "$STATE" && pwd) && cd "$STATE"  # the daemons' working directory, whatever the caller's
  export SPARK_HOME SPARK_LOCAL_IP=$HOST SPARK_WORKER_DIR=$STATE/work SPARK_LOG_DIR=$STATE/logs
  export SPARK_CONF_DIR=$STATE/conf
  # the worker's executors unpack rmqsim's environment here, once per content (`stop` removes it)
  export RMQSIM_EXECUTOR_ENV_CACHE=$STATE/envs
  # a busy port is an error, not a silent move to the next one (Spark's default is 16 retries)
  export SPARK_DAEMON_JAVA_OPTS="${SPARK_DAEMON_JAVA_OPTS:-} -Dspark.port.maxRetries=0"
  export SPARK_MASTER_OPTS="${SPARK_MASTER_OPTS:-} -Dspark.master.rest.enabled=false"
  export SPARK_WORKER_OPTS="${SPARK_WORKER_OPTS:-} -Dspark.worker.cleanup.enabled=true"
}

# pid of the session leader NAME (master|worker) if it is still the Spark daemon we started
running() {
  local pid
  pid=$(cat "$STATE/$1.pid" 2>/dev/null) || return 1
  ps -o args= -p "$pid" 2>/dev/null | grep -q 'org\.apache\.spark\.deploy\.' && echo "$pid"
}

session() { ps -e -o pid= -o sid= -o stat= | awk -v s="$1" '$2 == s && $3 !~ /^Z/ { print $1 }'; }

STARTED=()
launch() {  # NAME CLASS ARGS...: detached, in a session of its own; pid file = session id
  local name=$1; shift
  if running "$name" >/dev/null; then die "$name already running (pid $(cat "$STATE/$name.pid")); stop it first"; fi
  # a script's background job leads no process group, so setsid does not fork: $! leads the session
  setsid nohup "$SPARK_HOME/bin/spark-class" "$@" >"$STATE/logs/$name.log" 2>&1 </dev/null &
  echo $! >"$STATE/$name.pid"
  STARTED=("$name" "${STARTED[@]}")
}

json() {  # URL EXPR [WAIT_S PID]: EXPR of the JSON at URL (as `j`); with WAIT_S, polls until
  # EXPR is true while PID lives, at most WAIT_S seconds (exit status 1 if not)
  "$PY" - "$@" <<'EOF' 2>/dev/null
import json, sys, time, urllib.request
url, expr, wait_s, pid = (sys.argv[1:] + ["0", "0"])[:4]
deadline = time.monotonic() + float(wait_s)

def alive():  # not gone, nor a zombie
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False

while True:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            value = eval(expr, {"j": json.load(r)})
    except (OSError, ValueError, KeyError):
        value = None
    if not float(wait_s):
        sys.exit(print(value))
    if value:
        sys.exit(0)
    if time.monotonic() > deadline or not alive():
        sys.exit(1)
    time.sleep(0.25)
EOF
}

wait_for() {  # NAME DESCRIPTION URL EXPR: until EXPR holds, while the daemon NAME lives, at most WAIT_S
  json "$3" "$4" "$WAIT_S" "$(cat "$STATE/$1.pid")" && return
  echo "spark_standalone: $2 did not come up (the $1 exited, or ${WAIT_S} s passed); $STATE/logs/$1.log ends:" >&2
  grep -v '^[[:space:]]*at ' "$STATE/logs/$1.log" | tail -n 20 >&2 || true  # without stack frames
  stop "${STARTED[@]}" >&2  # what this command started, no more
  exit 1
}

start_master() {
  launch master org.apache.spark.deploy.master.Master \
    --host "$HOST" --port "$MASTER_PORT" --webui-port "$MASTER_WEBUI"
  wait_for master "the master at $HOST:$MASTER_PORT" "http://$HOST:$MASTER_WEBUI/json/" \
    "j['status'] == 'ALIVE' and j['url'] == 'spark://$HOST:$MASTER_PORT'"
  echo "spark://$HOST:$MASTER_PORT http://$HOST:$MASTER_WEBUI/json/" >"$STATE/master.url"
  echo "master spark://$HOST:$MASTER_PORT (web UI http://$HOST:$MASTER_WEBUI)"
}

start_worker() {
  [[ $1 == spark://* ]] || die "start-worker needs the master URL, spark://HOST:PORT"
  launch worker org.apache.spark.deploy.worker.Worker --host "$HOST" --webui-port "$WORKER_WEBUI" \
    --cores "${SPARK_WORKER_CORES:-$(nproc)}" --memory "${SPARK_WORKER_MEMORY:-2g}" "$1"
  wait_for worker "registration with $1" "http://$HOST:$WORKER_WEBUI/json/" "bool(j['masterurl'])"
  echo "worker of $1 (web UI http://$HOST:$WORKER_WEBUI, work dir $STATE/work)"
}

stop() {  # NAMES (worker first: its executors go with it): each daemon's whole session; idempotent
  local name sid pids leader
  for name in "$@"; do
    sid=$(cat "$STATE/$name.pid" 2>/dev/null) || continue
    # a live leader that is not Spark: the pid was reused by someone else, whose processes are not ours
    if leader=$(ps -o stat=,args= -p "$sid") && [[ $leader != Z* && $leader != *org.apache.spark.deploy.* ]]; then
      rm -f "$STATE/$name.pid"; continue
    fi
    mapfile -t pids < <(session "$sid")
    if ((${#pids[@]})); then
      kill -TERM "${pids[@]}" 2>/dev/null || true
      for _ in $(seq 100); do [[ -z $(session "$sid") ]] && break; sleep 0.1; done  # 10 s to shut down
      for _ in $(seq 50); do
        mapfile -t pids < <(session "$sid")
        ((${#pids[@]})) || break
        kill -KILL "${pids[@]}" 2>/dev/null || true
        sleep 0.1
      done
      [[ -z $(session "$sid") ]] || die "$name: processes $(session "$sid" | xargs) survived SIGKILL"
      echo "stopped $name (session $sid)"
    fi
    rm -f "$STATE/$name.pid"
    [[ $name != master ]] || rm -f "$STATE/master.url"
  done
}

remove_envs() {  # the executors' environments (no executor is left to use them): rmqsim's own folder
  if [[ -d $STATE/envs && ! -L $STATE/envs ]]; then
    rm -rf -- "$STATE/envs"
    echo "removed the executors' environments ($STATE/envs)"
  fi
}

status() {
  local name pid url webui
  for name in master worker; do
    if pid=$(running "$name"); then echo "$name: running (pid $pid)"; else echo "$name: not running"; fi
  done
  if [[ -f $STATE/master.url ]] && read -r url webui <"$STATE/master.url"; then
    echo "master $url: alive workers $(json "$webui" "j['aliveworkers']" || true)"
  fi
  if [[ -d $STATE/envs ]]; then
    echo "executors' environments: $(du -sh "$STATE/envs" 2>/dev/null | cut -f1) in $STATE/envs"
  fi
  echo "state: $STATE (work/, logs/, conf/, envs/)"
}

case ${1:-} in
  start) setup; start_master; start_worker "spark://$HOST:$MASTER_PORT"
         wait_for worker "the worker, as the master sees it," "http://$HOST:$MASTER_WEBUI/json/" \
           "j['aliveworkers'] >= 1"
         echo "spark://$HOST:$MASTER_PORT" ;;
  start-master) setup; start_master ;;
  start-worker) [[ $# -eq 2 ]] || die "usage: $0 start-worker spark://MASTER:PORT"; setup; start_worker "$2" ;;
  stop) stop worker master; remove_envs ;;
  status) status ;;
  *) die "usage: $0 start | start-master | start-worker MASTER_URL | stop | status" ;;
esac
