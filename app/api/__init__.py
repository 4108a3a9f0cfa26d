"""The HTTP edge: the FastAPI app, its routes, authentication, the dashboard's pages, static
files and templates, the Idempotency-Key wrapper of every state-changing route, and the one
mapping of domain errors to HTTP answers."""
