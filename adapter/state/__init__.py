"""State rebuilt from the compacted topics: the catalog (buckets, streams, producer states,
slot owners), its records' encoding, and the follower that keeps it up to date."""
