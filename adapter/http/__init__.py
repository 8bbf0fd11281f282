"""The HTTP edge: routes, header parsing into typed commands, and the one renderer."""
