# syntax=docker/dockerfile:1
# The operator image: `backscroll-operator` (kopf). It carries the operator's own dependencies
# only, not the service's (no embedded PostgreSQL, no embeddings model): the operator never
# touches the database. Build: `make images`. Non-root, read-only root filesystem.
ARG PYTHON_IMAGE=python:3.11.13-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
RUN python -m venv /opt/backscroll
COPY pyproject.toml README.md ./
COPY backscroll ./backscroll
COPY sql ./sql
COPY operator ./operator
# --no-deps, then what backscroll_operator imports (tests/deploy/test_images.py keeps this list
# in step with the operator's imports and the [operator] extra).
RUN /opt/backscroll/bin/pip install --no-deps . \
 && /opt/backscroll/bin/pip install "kopf>=1.45" "kubernetes>=37" "httpx>=0.27" "pydantic>=2.7" "pydantic-settings>=2.3" \
 && /opt/backscroll/bin/python -m compileall -q /opt/backscroll \
 && /opt/backscroll/bin/backscroll-operator --help >/dev/null

FROM ${PYTHON_IMAGE}
RUN groupadd --system --gid 10001 backscroll \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin backscroll
COPY --from=build /opt/backscroll /opt/backscroll
ENV PATH=/opt/backscroll/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 10001:10001
EXPOSE 8081
ENTRYPOINT ["backscroll-operator"]
CMD ["--liveness", "http://0.0.0.0:8081/healthz"]
