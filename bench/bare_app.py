"""The reference of the predict benchmark: a bare FastAPI JSON route, nothing else (no
middleware, no database, no auth), served by the same uvicorn from the same virtualenv.

    uvicorn bench.bare_app:app
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

app = FastAPI()


@app.post("/predict")
async def predict(payload: dict[str, Any]) -> dict[str, Any]:
    """Reads a JSON body and answers a predict-shaped JSON document."""
    return {"model_id": "bare", "labels": [1.0] * len(payload.get("instances", [])),
            "decision_values": [0.5], "classes": [-1.0, 1.0], "probabilities": None}
