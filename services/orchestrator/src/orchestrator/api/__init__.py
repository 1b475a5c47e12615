"""HTTP surface: routers, request/response schemas, error mapping, auth, SSE."""
