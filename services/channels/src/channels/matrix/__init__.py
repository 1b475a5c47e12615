"""The Matrix channel: the client-server API through matrix-nio's AsyncClient."""
