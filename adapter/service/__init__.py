"""The stream logic: decides each command against the catalog and carries it out on the log;
and the hub where waiters wait for a stream to change."""
