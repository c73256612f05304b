# One image for every Podway process; the command picks the service (docker-compose.yml, deploy/k8s).
# Built in two stages: uv (pinned, copied from its image, no installer run) resolves the lock file into
# /opt/venv; the runtime stage copies the environment and the source, owned by root and read-only to the
# service's user (numeric, so a pod's runAsNonRoot can check it). Services write only under PODWAY_DATA_DIR.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ghcr.io/astral-sh/uv:0.13.9 AS uv

FROM ${PYTHON_IMAGE} AS build
COPY --from=uv /uv /usr/local/bin/uv
ENV UV_PROJECT_ENVIRONMENT=/opt/venv UV_COMPILE_BYTECODE=1 UV_LINK_MODE=copy UV_PYTHON_DOWNLOADS=never
WORKDIR /app
COPY pyproject.toml uv.lock README.md ./
# The dependencies first: a source change does not reinstall them.
RUN uv sync --frozen --no-dev --no-install-project
COPY libs libs
COPY services services
COPY bench bench
COPY migrations migrations
COPY deploy deploy
RUN uv sync --frozen --no-dev

FROM ${PYTHON_IMAGE}
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PATH=/opt/venv/bin:$PATH PODWAY_DATA_DIR=/data
RUN groupadd --system --gid 10001 podway \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent podway \
    && install -d -o 10001 -g 10001 -m 0750 /data
COPY --from=build /opt/venv /opt/venv
COPY --from=build /app /app
# Root owns the code and the environment; the service's user may read them, not change them.
RUN chmod -R a-w,a+rX /opt/venv /app
WORKDIR /app
USER 10001:10001
