# Prometheus and Alertmanager from Debian's packages, for machines with no registry
# (scripts/build-images.sh): one image, one apt run, for both services. Laid out like the
# official images: /bin/prometheus as entrypoint (/bin is /usr/bin), data in /prometheus,
# config in /etc/prometheus; /bin/alertmanager (the alertmanager service's entrypoint) with
# its data in /alertmanager; wget for the healthchecks; runs as nobody.
ARG BASE_IMAGE=minihpc/debian:bookworm
FROM ${BASE_IMAGE}
RUN apt-get update -qq \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus \
        prometheus-alertmanager wget >/dev/null \
    && rm -rf /var/lib/apt/lists/* \
    && ln -sf /usr/bin/prometheus-alertmanager /usr/bin/alertmanager \
    && mkdir -p /prometheus /etc/prometheus /alertmanager /etc/alertmanager \
    && chown nobody:nogroup /prometheus /alertmanager
USER nobody
WORKDIR /prometheus
EXPOSE 9090 9093
ENTRYPOINT ["/bin/prometheus"]
CMD ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus"]
