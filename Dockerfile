FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY policy policy
COPY synthetic synthetic
COPY audit audit
COPY engine engine
COPY callbacks callbacks
COPY cards cards
COPY bot bot
COPY countersign countersign
COPY migrations migrations
COPY config config
RUN pip install --no-cache-dir -e .
ENV COUNTERSIGN_STATE_DIR=/var/lib/countersign
ENTRYPOINT ["countersign"]
