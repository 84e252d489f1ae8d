# Redis from Debian's package, for machines with no registry (scripts/build-images.sh).
# Runs like the official image: as the redis user, data in /data, `redis-server ARGS` as command.
ARG BASE_IMAGE=minihpc/debian:bookworm
FROM ${BASE_IMAGE}
RUN apt-get update -qq \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server >/dev/null \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /data && chown redis:redis /data
USER redis
WORKDIR /data
EXPOSE 6379
CMD ["redis-server"]
