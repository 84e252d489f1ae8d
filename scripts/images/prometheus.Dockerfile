# Prometheus from Debian's package, for machines with no registry (scripts/build-images.sh).
# Laid out like the official image: /bin/prometheus as entrypoint (/bin is /usr/bin), data in /prometheus,
# config in /etc/prometheus, wget for the healthcheck, runs as nobody.
ARG BASE_IMAGE=minihpc/debian:bookworm
FROM ${BASE_IMAGE}
RUN apt-get update -qq \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus wget >/dev/null \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /prometheus /etc/prometheus && chown nobody:nogroup /prometheus
USER nobody
WORKDIR /prometheus
EXPOSE 9090
ENTRYPOINT ["/bin/prometheus"]
CMD ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus"]
