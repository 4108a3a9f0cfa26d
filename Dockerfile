# One image for the API and the worker; the command chooses the role.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    HINGE_HOME=/data NUMBA_CACHE_DIR=/tmp/numba-cache
WORKDIR /srv/hinge

COPY pyproject.toml README.md alembic.ini ./
COPY app ./app
COPY workers ./workers
COPY solvers ./solvers
COPY migrations ./migrations
# Compile every Numba kernel into the image's cache at build time: no worker compiles at
# start, and no job waits for it. The deployment tests (tests/deploy) build the same
# install (testkit/runtime_venv.py: `pip install .` of the files copied above, no extras,
# then this warm-up) and run it on every documented deployment: keep the two in step.
RUN pip install . && useradd --create-home --uid 1000 hinge && mkdir -p /data \
    && python -c "from solvers.warmup import warmup; print(f'kernels compiled in {warmup():.0f} s')" \
    && chown -R hinge /data "$NUMBA_CACHE_DIR"
USER hinge
EXPOSE 8000
CMD ["uvicorn", "--factory", "app.api.main:create_app", "--host", "0.0.0.0", "--port", "8000"]
