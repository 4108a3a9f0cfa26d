"""The infrastructure: the database engine and sessions, the broker (the queue and the
bus), and blob storage (local files, S3, the blob cache)."""
