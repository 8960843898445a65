# Countersign's production image (ADR 0013). Two stages: the first builds the wheel, the second installs that wheel and
# the hash-locked production dependencies (requirements.lock) into a venv. The embedded PostgreSQL (the `embedded`
# extra, pgserver) is not installed: the image needs DATABASE_URL and the role URLs. No compiler in either stage.

FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY countersign countersign
COPY config config
RUN pip install --no-cache-dir --disable-pip-version-check "build>=1.2" \
    && python -m build --wheel --outdir /dist .

FROM python:3.11-slim AS runtime
# The commit the image is built from, shown as countersign_build_info{revision} on /metrics:
# docker build (or docker compose build) --build-arg COUNTERSIGN_REVISION=$(git rev-parse HEAD); anything but 7-40 hex
# digits reads "unknown"
ARG COUNTERSIGN_REVISION=unknown
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/countersign/bin:$PATH \
    COUNTERSIGN_STATE_DIR=/var/lib/countersign \
    COUNTERSIGN_REVISION=${COUNTERSIGN_REVISION}
COPY requirements.lock /tmp/install/requirements.lock
COPY --from=build /dist/ /tmp/install/
RUN python -m venv /opt/countersign \
    && /opt/countersign/bin/pip install --no-cache-dir --require-hashes -r /tmp/install/requirements.lock \
    && /opt/countersign/bin/pip install --no-cache-dir --no-deps /tmp/install/countersign_close-*.whl \
    && /opt/countersign/bin/pip check \
    && rm -rf /tmp/install \
    && groupadd --system --gid 10001 countersign \
    && useradd --system --uid 10001 --gid countersign --home-dir /var/lib/countersign --create-home \
        --shell /usr/sbin/nologin countersign
USER 10001:10001
WORKDIR /var/lib/countersign
EXPOSE 8000
# For `serve` (the default command). The worker serves no HTTP and the specialists listen on their own port: compose
# gives those services their own healthcheck.
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4).status != 200)"]
ENTRYPOINT ["countersign"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8000"]
