"""Several instances on one topic prefix: who owns each write slot, the writers of the slots
owned here, and where a write goes (handled here, forwarded, or refused while it moves)."""
