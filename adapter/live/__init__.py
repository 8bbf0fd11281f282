"""Live reads: SSE sessions parked at a stream's tail, the broadcaster that writes to them,
and the chunks shared by readers woken together (they wait in `adapter.service.hub`)."""
