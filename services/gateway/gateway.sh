#!/bin/sh
# Writes the gateway's nginx configuration from GATEWAY_* settings, then runs nginx in the
# foreground. Settings are checked (addresses and sizes only) before they reach the file.
set -eu
host=${GATEWAY_HOST:-}
port=${GATEWAY_PORT:-8080}
listen=${host:+$host:}$port
upstream=${GATEWAY_UPSTREAM:-orchestrator:8080}
resolver=${GATEWAY_RESOLVER:-127.0.0.11}
max_body=${GATEWAY_MAX_BODY:-30m}
for value in "$port" "$listen" "$upstream" "$resolver" "$max_body"; do
  case $value in
    "" | *[!A-Za-z0-9.:_-]*)
      echo "gateway: refusing setting value '$value' (letters, digits, . : _ - only)" >&2
      exit 2 ;;
  esac
done
sed -e "s|@LISTEN@|$listen|" -e "s|@UPSTREAM@|$upstream|" -e "s|@RESOLVER@|$resolver|" \
  -e "s|@MAX_BODY@|$max_body|" /etc/crayfish-gateway/nginx.conf.template >/tmp/nginx.conf
echo "gateway: listening on $listen, spreading requests over $upstream"
exec nginx -c /tmp/nginx.conf -g "daemon off;"
