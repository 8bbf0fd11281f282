"""Several instances on one topic prefix: write slots, their ownership, forwarding."""
