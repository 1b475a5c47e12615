#!/bin/sh
# crayfish-postgres: initdb on first start (POSTGRES_USER as superuser with POSTGRES_PASSWORD,
# database POSTGRES_DB), then the server in the foreground as PID 1.
#   PGDATA (data folder, in the volume), PGPORT, POSTGRES_HOST (listen addresses, * by default).
# Password logins (scram-sha-256) from anywhere the network lets in; the Unix socket in /tmp
# (the healthcheck's) trusts local users. Arguments starting with "-" go to the server; any other
# command runs instead of it (`docker run crayfish-postgres psql ...`).
set -eu
if [ "$#" -gt 0 ] && [ "${1#-}" = "$1" ]; then
  exec "$@"
fi
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  if [ -z "${POSTGRES_PASSWORD:-}" ]; then
    echo "crayfish-postgres: POSTGRES_PASSWORD is required to create the database" >&2
    exit 1
  fi
  mkdir -p "$PGDATA"
  chmod 0700 "$PGDATA"
  pwfile=$(mktemp)
  printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
  initdb -D "$PGDATA" -U "$POSTGRES_USER" --pwfile="$pwfile" --auth-local=trust \
    --auth-host=scram-sha-256 --encoding=UTF8 --locale=C --no-instructions >/dev/null
  rm -f "$pwfile"
  printf 'host all all 0.0.0.0/0 scram-sha-256\nhost all all ::/0 scram-sha-256\n' \
    >>"$PGDATA/pg_hba.conf"
  if [ "$POSTGRES_DB" != postgres ]; then
    echo "CREATE DATABASE \"$POSTGRES_DB\" OWNER \"$POSTGRES_USER\";" \
      | postgres --single -D "$PGDATA" -j postgres >/dev/null
  fi
  echo "crayfish-postgres: initialised $PGDATA (database $POSTGRES_DB, user $POSTGRES_USER)"
fi
exec postgres -D "$PGDATA" -p "$PGPORT" -k /tmp -c listen_addresses="$POSTGRES_HOST" "$@"
