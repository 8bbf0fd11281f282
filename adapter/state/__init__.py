"""State rebuilt from the compacted topics: the catalog of buckets and streams."""
