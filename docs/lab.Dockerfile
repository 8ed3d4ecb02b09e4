# syntax=docker/dockerfile:1
# Needs BuildKit (the COPY <<'SH' heredoc below): Docker 23 and later use it by default; with an
# older engine, DOCKER_BUILDKIT=1 docker build ... (the classic builder refuses the heredoc).
# A disposable lab "VM" for CI: sshd with what the remote contract needs (docs/remote-contract.md):
# bash, GNU coreutils (timeout, base64), util-linux (setsid, unshare). Debian or Ubuntu based
# images work; Alpine/busybox ones do not (no bash, busybox timeout).
# The host key is mounted read-only at /etc/ssh/ssh_host_ed25519_key by the job, which made it
# (so it is pinned before the lab starts); LAB_AUTHORIZED_KEY is the job's public key.
#   docker build -t rexec-lab -f docs/lab.Dockerfile docs
#   docker run -d -p 127.0.0.1:2222:22 -v "$PWD/host_key:/etc/ssh/ssh_host_ed25519_key:ro" \
#       -e LAB_AUTHORIZED_KEY="$(cat client_key.pub)" rexec-lab
FROM debian:12-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends openssh-server bash coreutils util-linux procps \
 && rm -rf /var/lib/apt/lists/* /etc/ssh/ssh_host_* \
 && useradd -m -s /bin/bash lab && passwd -d lab >/dev/null && usermod -p '*' lab \
 && mkdir -p /run/sshd
COPY <<'SH' /usr/local/sbin/lab-sshd
#!/bin/bash
set -euo pipefail
: "${LAB_AUTHORIZED_KEY:?set LAB_AUTHORIZED_KEY to the CI job's public key}"
[[ -s /etc/ssh/ssh_host_ed25519_key ]] || { echo "mount the host key at /etc/ssh/ssh_host_ed25519_key" >&2; exit 1; }
install -d -m 700 -o lab -g lab /home/lab/.ssh
printf '%s\n' "$LAB_AUTHORIZED_KEY" >/home/lab/.ssh/authorized_keys
chown lab:lab /home/lab/.ssh/authorized_keys && chmod 600 /home/lab/.ssh/authorized_keys
# sshd wants the key 0600 and root's: copy the mounted one
install -m 600 /etc/ssh/ssh_host_ed25519_key /run/sshd/host_key
exec /usr/sbin/sshd -D -e -h /run/sshd/host_key -o PasswordAuthentication=no \
    -o KbdInteractiveAuthentication=no -o PermitRootLogin=no -o MaxSessions=16
SH
RUN chmod 755 /usr/local/sbin/lab-sshd
EXPOSE 22
CMD ["/usr/local/sbin/lab-sshd"]
