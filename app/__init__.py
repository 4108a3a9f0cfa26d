"""Hinge's HTTP API: settings, database, ORM models, schemas, routes and the dashboard."""
