# The controller image for CI jobs: rexec from the .deb this repository builds, and what the recipe
# (docs/ci-recipe.sh) uses. Build it from a checkout (it builds the .deb in a first stage):
#   docker build -t rexec-controller -f docs/controller.Dockerfile .
#   docker run --rm -e LAB_PROVIDER=external ... rexec-controller ci-recipe
FROM debian:12 AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends build-essential cmake pkg-config \
      libssh2-1-dev libuv1-dev libcjson-dev libssl-dev dpkg-dev file ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY . /src
RUN cmake -S /src -B /build -DCMAKE_BUILD_TYPE=Release \
 && cmake --build /build -j"$(nproc)" \
 && cd /build && cpack -G DEB

FROM debian:12-slim
COPY --from=build /build/rexec_*.deb /tmp/
RUN apt-get update \
 && apt-get install -y --no-install-recommends /tmp/rexec_*.deb openssh-client bash ca-certificates \
 && rm -rf /var/lib/apt/lists/* /tmp/rexec_*.deb \
 && useradd -m -s /bin/bash ci
COPY docs/ci-recipe.sh docs/lab.Dockerfile /usr/local/share/rexec-ci/
RUN chmod 755 /usr/local/share/rexec-ci/ci-recipe.sh \
 && ln -s /usr/local/share/rexec-ci/ci-recipe.sh /usr/local/bin/ci-recipe && rexec --version
USER ci
WORKDIR /home/ci
ENTRYPOINT []
CMD ["rexec", "--help"]
