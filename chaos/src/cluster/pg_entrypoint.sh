#!/bin/sh
# Entrypoint of the offline PostgreSQL image (see pg_image.rs): the official image's first-run
# contract on a FROM scratch image with nothing but dash and the PostgreSQL binaries, so only
# shell builtins here (no rm, no chown: the image runs as `postgres` and owns PGDATA).
#   POSTGRES_PASSWORD          the superuser's password (required unless the method is trust)
#   POSTGRES_USER              the superuser (default postgres)
#   POSTGRES_DB                a database created on first run (default $POSTGRES_USER)
#   POSTGRES_HOST_AUTH_METHOD  for host connections (default scram-sha-256)
#   PGDATA                     the data dir (default /var/lib/postgresql/data)
# Arguments are passed to postgres (e.g. -c fsync=off).
set -eu
: "${PGDATA:=/var/lib/postgresql/data}"
export PGDATA
user="${POSTGRES_USER:-postgres}"
db="${POSTGRES_DB:-$user}"
auth="${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}"

if [ ! -s "$PGDATA/PG_VERSION" ]; then
  if [ "$auth" = trust ]; then
    initdb -U "$user" --auth-local=trust --auth-host=trust -E UTF8 --locale=C
  elif [ -n "${POSTGRES_PASSWORD:-}" ]; then
    # The password goes through a pipe: no file to leave behind (there is no rm).
    printf '%s\n' "$POSTGRES_PASSWORD" \
      | initdb -U "$user" --pwfile=/dev/stdin --auth-local=trust --auth-host="$auth" -E UTF8 --locale=C
  else
    echo "entrypoint: set POSTGRES_PASSWORD (or POSTGRES_HOST_AUTH_METHOD=trust)" >&2
    exit 1
  fi
  # initdb allows host connections from loopback only; the published port needs any address.
  printf 'host all all all %s\n' "$auth" >> "$PGDATA/pg_hba.conf"
  if [ "$db" != postgres ]; then
    # A private server: no TCP, its socket in /tmp, where pg_isready does not look, so the
    # health check cannot pass before the database exists.
    pg_ctl -D "$PGDATA" -o "-c listen_addresses='' -k /tmp" -w start
    psql -h /tmp -U "$user" -d postgres -v ON_ERROR_STOP=1 --set db="$db" <<'EOSQL'
CREATE DATABASE :"db";
EOSQL
    pg_ctl -D "$PGDATA" -m fast -w stop
  fi
  echo "entrypoint: initialised $PGDATA (superuser $user, database $db)"
fi

exec postgres -D "$PGDATA" -c listen_addresses=0.0.0.0 "$@"
