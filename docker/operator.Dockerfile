# syntax=docker/dockerfile:1
# The operator image: `backscroll-operator` (kopf). It carries the operator's own dependencies
# only, not the service's (no embedded PostgreSQL, no embeddings model): the operator never
# touches the database. Build: `make images`. Non-root, read-only root filesystem.
# PYTHON_IMAGE, the base (a build argument): `make images` passes the Debian bookworm base that
# docker/base/build-base.sh assembles from Debian's packages (localhost/backscroll-base:bookworm-…,
# python3 3.11). The default is for `CONTAINER_BUILD=docker make images` where Docker Hub is
# reachable: pinned to an exact tag, fully qualified; pin it by digest (…@sha256:…) where your
# registry policy asks for it. Either base has python3 at /usr/bin or /usr/local/bin and
# groupadd/useradd.
ARG PYTHON_IMAGE=docker.io/library/python:3.11.13-slim-bookworm
# The OCI labels' values (org.opencontainers.image.*): `make images` passes VERSION and
# REVISION=$(git rev-parse HEAD); VERSION's default is pyproject.toml's version.
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG SOURCE=https://github.com/backscroll/backscroll

FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
RUN python3 -m venv /opt/backscroll
# Every dependency from the lockfile (requirements/operator.in: what backscroll_operator imports),
# each distribution checked against its sha256: the build resolves nothing.
COPY requirements/operator.lock ./requirements/
RUN /opt/backscroll/bin/pip install --require-hashes --no-deps -r requirements/operator.lock
COPY pyproject.toml README.md ./
COPY backscroll ./backscroll
COPY sql ./sql
COPY operator ./operator
# --no-deps: the package only; its dependencies are the lockfile's (not the service's, so no
# `pip check`: the distribution declares the service's). Then pip and setuptools leave the venv
# (nothing runs them in the image), and so does the kubernetes client's asyncio twin,
# kubernetes.aio (68 MB compiled): the operator uses kubernetes.config only (its credentials),
# kopf speaks to the API with aiohttp, and nothing imports the twin; the checks below import what
# is used.
RUN /opt/backscroll/bin/pip install --no-deps --no-build-isolation . \
 && /opt/backscroll/bin/python -m pip uninstall --yes --quiet pip setuptools \
 && rm -rf /opt/backscroll/lib/python3*/site-packages/kubernetes/aio \
 && /opt/backscroll/bin/python -m compileall -q /opt/backscroll \
 && /opt/backscroll/bin/python -c "import kubernetes.config, kubernetes.client, kopf._core.intents.piggybacking, backscroll_operator.main, backscroll_operator.kube" \
 && /opt/backscroll/bin/backscroll-operator --help >/dev/null

FROM ${PYTHON_IMAGE}
RUN groupadd --system --gid 10001 backscroll \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin backscroll
COPY --from=build /opt/backscroll /opt/backscroll
ARG VERSION
ARG REVISION
ARG SOURCE
LABEL org.opencontainers.image.title="backscroll-operator" \
      org.opencontainers.image.description="The Backscroll SearchIndex operator (kopf): migrations, API, worker, embeddings server and backfills of each SearchIndex" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PATH=/opt/backscroll/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 10001:10001
EXPOSE 9090
ENTRYPOINT ["backscroll-operator"]
CMD ["--metrics", "http://0.0.0.0:9090"]
