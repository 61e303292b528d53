#!/usr/bin/env bash
# services.sh [test]: makes sure the two servers memoryd needs answer:
# PostgreSQL and NATS with JetStream, where MEMORYD_DATABASE_URL /
# MEMORYD_NATS_URL point (make demo, make serve), or, given "test" (make test,
# make systest), where MEMORYD_TEST_DATABASE_URL / MEMORYD_TEST_NATS_URL point;
# each unset, 127.0.0.1:5432 and 127.0.0.1:4222. A local server on its default
# port that is installed but stopped is started; any other address is only
# checked, since this machine cannot start it. What is missing is reported in
# one sentence with the fix. MEMORYD_SKIP_SERVICES=1 skips every check.
set -u
[ "${MEMORYD_SKIP_SERVICES:-}" = 1 ] && exit 0

# hostport URL DEFAULT_PORT prints "host port" of a URL such as
# postgres://user:pw@host:5433/db?x=y, nats://host:4222 or host:4222 (NATS
# takes it without a scheme), or of a key=value connection string
# (host=H port=P); nothing when it names no TCP host (a Unix socket).
hostport() {
  local rest=${1#*://} host port
  if [ "$rest" = "$1" ]; then
    case $1 in
      *=*) kvhostport "$1" "$2"; return 0 ;;
      */* | '') return 0 ;;
    esac
  fi
  # A query's host= and port= override the URL's (libpq, pgx):
  # postgres://localhost/db?host=/var/run/postgresql is a socket.
  local q=${1#*\?} kv kvs=() qhost= qport=
  [ "$q" = "$1" ] || IFS='&' read -ra kvs <<<"$q"
  for kv in "${kvs[@]}"; do
    case $kv in host=*) qhost=${kv#host=} ;; port=*) qport=${kv#port=} ;; esac
  done
  case $qhost in /* | %2[Ff]*) return 0 ;; esac
  rest=${rest%%[/?]*}
  rest=${rest##*@}
  rest=${rest%%,*} # nats://a:4222,b:4222: the first
  case $rest in
    \[*\]:*) host=${rest%]:*}; host=${host#[}; port=${rest##*]:} ;;
    \[*\]) host=${rest#[}; host=${host%]}; port=$2 ;;
    *:*) host=${rest%%:*}; port=${rest##*:} ;;
    *) host=$rest; port=$2 ;;
  esac
  host=${qhost:-$host} port=${qport:-$port}
  [ -n "$host" ] || return 0
  echo "$host $port"
}

# kvhostport DSN DEFAULT_PORT: hostport of a key=value connection string;
# the first of several hosts; nothing for none or a socket directory.
kvhostport() {
  local host= port=$2 w words
  read -ra words <<<"$1"
  for w in "${words[@]}"; do
    case $w in
      host=*) host=${w#host=} ;;
      port=*) port=${w#port=} ;;
    esac
  done
  host=${host//\'/} port=${port//\'/}
  host=${host%%,*} port=${port%%,*}
  case $host in '' | /* | @*) return 0 ;; esac
  echo "$host ${port:-$2}"
}

port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

wait_port() {
  for _ in $(seq 1 50); do port_open "$1" "$2" && return 0; sleep 0.2; done
  return 1
}

# addr HOST PORT prints host:port, an IPv6 host in brackets.
addr() { case $1 in *:*) echo "[$1]:$2" ;; *) echo "$1:$2" ;; esac; }

is_local_default() { # host port default_port
  case $1 in 127.0.0.1 | localhost) [ "$2" = "$3" ] ;; *) return 1 ;; esac
}

# target DEFAULT_PORT URL prints the address to check: the URL's, else
# (unset) the local default; nothing for a URL naming no TCP host.
target() {
  if [ -n "$2" ]; then hostport "$2" "$1"; else echo "127.0.0.1 $1"; fi
}

if [ "${1:-}" = test ]; then
  dbvar=MEMORYD_TEST_DATABASE_URL natsvar=MEMORYD_TEST_NATS_URL
else
  dbvar=MEMORYD_DATABASE_URL natsvar=MEMORYD_NATS_URL
fi

start_postgres() {
  if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
    for v in $(ls /etc/postgresql); do
      pg_ctlcluster --skip-systemctl-redirect "$v" main start >/dev/null 2>&1 || true
    done
  fi
}

# start_nats starts a local nats-server on 4222 with JetStream, its store in
# /var/lib/nats-server when it can write there (root), else in the user's
# state directory.
start_nats() {
  local bin dir log
  bin=$(command -v nats-server || echo /usr/sbin/nats-server)
  [ -x "$bin" ] || return 0
  dir=/var/lib/nats-server
  if ! { mkdir -p "$dir" && [ -w "$dir" ]; } 2>/dev/null; then
    dir=${XDG_STATE_HOME:-$HOME/.local/state}/memoryd/nats-server
    mkdir -p "$dir" || return 0
  fi
  log=$dir/nats-server.log
  if command -v start-stop-daemon >/dev/null 2>&1; then
    # By its pidfile: matched by --exec alone, any nats-server running (a
    # test's private one on another port) counts as "already running".
    start-stop-daemon --start --oknodo --background --make-pidfile --pidfile "$dir/nats-server.pid" --exec "$bin" -- \
      -a 127.0.0.1 -p 4222 -js -sd "$dir" -l "$log" >/dev/null 2>&1 || true
  else
    nohup "$bin" -a 127.0.0.1 -p 4222 -js -sd "$dir" -l "$log" >/dev/null 2>&1 &
  fi
}

while read -r host port; do
  port_open "$host" "$port" && continue
  if is_local_default "$host" "$port" 5432; then
    start_postgres
    wait_port "$host" "$port" && continue
    echo "PostgreSQL is not running on 127.0.0.1:5432 and could not be started: install it (apt-get install postgresql) or run 'docker compose up -d postgres'." >&2
  else
    echo "PostgreSQL does not answer at $(addr "$host" "$port") (from $dbvar): start it there, or point the variable at a running server." >&2
  fi
  exit 1
done < <(target 5432 "${!dbvar:-}")

while read -r host port; do
  port_open "$host" "$port" && continue
  if is_local_default "$host" "$port" 4222; then
    start_nats
    wait_port "$host" "$port" && continue
    if command -v nats-server >/dev/null 2>&1 || [ -x /usr/sbin/nats-server ]; then
      echo "NATS is not running on 127.0.0.1:4222 and nats-server, though installed, did not start: run it yourself with -js (nats-server -a 127.0.0.1 -p 4222 -js -sd DIR) or run 'docker compose up -d nats'." >&2
    else
      echo "NATS is not running on 127.0.0.1:4222 and could not be started: install it (apt-get install nats-server) and run it with -js, or run 'docker compose up -d nats'." >&2
    fi
  else
    echo "NATS does not answer at $(addr "$host" "$port") (from $natsvar): start nats-server with -js there, or point the variable at a running server." >&2
  fi
  exit 1
done < <(target 4222 "${!natsvar:-}")
exit 0
