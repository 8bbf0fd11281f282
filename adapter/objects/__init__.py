"""The object store behind the cold tier and snapshots: S3, or a local folder."""
