"""The domain: the ORM model, the services that routes and workers call (they raise
app.domain.errors' kinds and speak no HTTP), the schemas, the predict and export formats,
and the life cycle of durable work (leases, the sweep, the outbox)."""
