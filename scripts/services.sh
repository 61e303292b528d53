#!/usr/bin/env bash
# Makes sure the two servers memoryd needs answer on this machine: PostgreSQL
# on 127.0.0.1:5432 and NATS with JetStream on 127.0.0.1:4222. A server that is
# installed but stopped is started; one that is missing is reported in one
# sentence with the fix. Point MEMORYD_DATABASE_URL / MEMORYD_NATS_URL
# elsewhere and set MEMORYD_SKIP_SERVICES=1 to manage them yourself.
set -u
[ "${MEMORYD_SKIP_SERVICES:-}" = 1 ] && exit 0

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_port() {
  for _ in $(seq 1 50); do port_open "$1" && return 0; sleep 0.2; done
  return 1
}

if ! port_open 5432; then
  if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
    for v in $(ls /etc/postgresql); do
      pg_ctlcluster --skip-systemctl-redirect "$v" main start >/dev/null 2>&1 || true
    done
  fi
  if ! wait_port 5432; then
    echo "PostgreSQL is not running on 127.0.0.1:5432 and could not be started: install it (apt-get install postgresql) or run 'docker compose up -d postgres'." >&2
    exit 1
  fi
fi

if ! port_open 4222; then
  bin=$(command -v nats-server || echo /usr/sbin/nats-server)
  if [ -x "$bin" ]; then
    mkdir -p /var/lib/nats-server 2>/dev/null || true
    if command -v start-stop-daemon >/dev/null 2>&1; then
      start-stop-daemon --start --oknodo --background --exec "$bin" -- \
        -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log >/dev/null 2>&1 || true
    else
      nohup "$bin" -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server >/dev/null 2>&1 &
    fi
  fi
  if ! wait_port 4222; then
    echo "NATS is not running on 127.0.0.1:4222 and could not be started: install it (apt-get install nats-server) and run it with -js, or run 'docker compose up -d nats'." >&2
    exit 1
  fi
fi
exit 0
