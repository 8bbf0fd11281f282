"""Live tails: waiters registered by stream, woken by local commits and by the meta follower."""
