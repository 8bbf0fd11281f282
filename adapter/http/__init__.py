"""The HTTP edge: routes and middlewares; handlers turn requests into typed commands and
results into responses, and the rest of the adapter never sees a request."""
