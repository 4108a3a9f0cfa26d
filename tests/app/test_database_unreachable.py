"""A database that refuses new connections is a 503 with Retry-After, not a 500: the
chaos soak, with PostgreSQL at its max_connections, got 'sorry, too many clients
already' as 500s. The statement that needed the connection never ran."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from fastapi import FastAPI
from fastapi.testclient import TestClient

from app.api.http_errors import install_error_handlers


def _refused_connection() -> sa.exc.OperationalError:
    """The error psycopg raises when PostgreSQL refuses a connection: a real one, from a
    port on loopback where nothing listens."""
    engine = sa.create_engine("postgresql+psycopg://postgres@127.0.0.1:9/test",
                              connect_args={"connect_timeout": 2})
    with pytest.raises(sa.exc.OperationalError) as refused:
        engine.connect()
    engine.dispose()
    return refused.value


def test_a_refused_database_connection_is_a_503_with_retry_after() -> None:
    refused = _refused_connection()
    assert str(refused.orig).startswith("connection failed")
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/needs-the-database")
    def needs_the_database() -> None:
        raise refused

    @app.get("/fails-otherwise")
    def fails_otherwise() -> None:
        raise sa.exc.OperationalError("SELECT 1", {}, Exception("server closed the connection"))

    with TestClient(app, raise_server_exceptions=False) as client:
        answer = client.get("/needs-the-database")
        assert answer.status_code == 503 and answer.headers["Retry-After"]
        assert answer.json()["error"]["message"].startswith("the database cannot be reached")
        assert "127.0.0.1" not in answer.text  # no server detail in the answer
        assert client.get("/fails-otherwise").status_code == 500
