# A stand-in for a freshly installed Debian host, for the Ansible tests (tests/ansible): systemd
# as PID 1, sshd, sudo and python3 -- what a Debian cloud image has -- and nothing of minihpc.
# The roles in ansible/ install everything else over SSH, as they would on a real host.
#
# Built on the Debian base the project bootstraps (scripts/bootstrap-base.sh), no registry.
# Runs without --privileged: --cgroupns=host -v /sys/fs/cgroup:/sys/fs/cgroup:rw
# --tmpfs /run --tmpfs /run/lock, command /sbin/init (tests/ansible/hosts.py does that).
ARG BASE_IMAGE=minihpc/debian:bookworm
FROM ${BASE_IMAGE}
RUN apt-get update -qq \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        systemd systemd-sysv dbus openssh-server sudo python3 ca-certificates iproute2 >/dev/null \
    && rm -rf /var/lib/apt/lists/* \
    # No consoles, no waiting for a network manager: a container has neither.
    && systemctl mask getty.target console-getty.service systemd-networkd-wait-online.service \
        systemd-firstboot.service systemd-remount-fs.service >/dev/null 2>&1 \
    && systemctl enable ssh >/dev/null 2>&1 \
    # The cloud image's default user: SSH with a key only, passwordless sudo.
    && useradd --create-home --shell /bin/bash admin \
    && echo 'admin ALL=(ALL) NOPASSWD: ALL' > /etc/sudoers.d/admin && chmod 0440 /etc/sudoers.d/admin \
    # Keys come from a file the test mounts read-only (/etc/ssh/authorized_keys/<user>);
    # host keys are made at first boot (each container its own), as a cloud image does.
    && printf 'PasswordAuthentication no\nKbdInteractiveAuthentication no\nPermitRootLogin no\nAuthorizedKeysFile .ssh/authorized_keys /etc/ssh/authorized_keys/%%u\n' \
        > /etc/ssh/sshd_config.d/host.conf \
    && rm -f /etc/ssh/ssh_host_*key* \
    && printf '[Unit]\nDescription=Host keys made at first boot\nBefore=ssh.service\nConditionPathExists=!/etc/ssh/ssh_host_ed25519_key\n[Service]\nType=oneshot\nExecStart=/usr/bin/ssh-keygen -A\n[Install]\nWantedBy=multi-user.target\n' \
        > /etc/systemd/system/host-keys.service \
    && systemctl enable host-keys.service >/dev/null 2>&1
STOPSIGNAL SIGRTMIN+3
CMD ["/sbin/init"]
