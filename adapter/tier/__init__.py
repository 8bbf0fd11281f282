"""The cold tier: per-stream chunk objects (Avro container files), the manifest of tiered
ranges, and reads from chunks."""
