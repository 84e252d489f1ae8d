"""Jobs kept off Redis's port by uid (core.firewall): the rules a node agent sets."""

import pytest

from minihpc.core import firewall


@pytest.mark.parametrize("url, endpoint", [
    ("redis://node:pw@redis:6379/0", ("redis", 6379)),
    ("redis://node:pw@10.0.0.5/0", ("10.0.0.5", 6379)),
    ("rediss://node:pw@[fd00::1]:7000/0", ("fd00::1", 7000)),
    ("unix:///run/redis.sock", None),
])
def test_the_guarded_endpoint_is_redis_urls_host_and_port(url, endpoint):
    assert firewall.redis_endpoint(url) == endpoint


def test_only_the_allowed_uids_may_open_a_connection_to_each_address_and_every_other_is_reset():
    argvs = firewall.commands(["172.18.0.2", "fd00::2"], 6379, [0, 10001, 0], [10001])
    v4 = [a for a in argvs if a[0] == "iptables"]
    v6 = [a for a in argvs if a[0] == "ip6tables"]
    assert v4[0] == ["iptables", "-w", "5", "-F", firewall.CHAIN]
    rules = [" ".join(a[3:]) for a in v4[1:]]
    match = "-p tcp --syn -d 172.18.0.2 --dport 6379"
    assert rules == [f"-A {firewall.CHAIN} {match} -m owner --uid-owner 0 -j RETURN",
                     f"-A {firewall.CHAIN} {match} -m owner --uid-owner 10001 -j RETURN",
                     f"-A {firewall.CHAIN} {match} -m owner --gid-owner 10001 --suppl-groups -j RETURN",
                     f"-A {firewall.CHAIN} {match} -j REJECT --reject-with tcp-reset"]
    assert [a[-1] for a in v6[1:]] == ["RETURN", "RETURN", "RETURN", "tcp-reset"] and "fd00::2" in v6[1]


def test_no_address_of_a_family_makes_no_command_for_it():
    assert {a[0] for a in firewall.commands(["127.0.0.1"], 6379, [0])} == {"iptables"}
    assert firewall.commands([], 6379, [0]) == []


def test_the_jump_is_checked_before_it_is_added_first_in_output():
    assert firewall.jump("iptables", check=True) == ["iptables", "-w", "5", "-C", "OUTPUT", "-j", firewall.CHAIN]
    assert firewall.jump("iptables", check=False) == ["iptables", "-w", "5", "-I", "OUTPUT", "1", "-j", firewall.CHAIN]


def test_loopback_is_guarded_too_when_redis_is_on_this_machine():
    assert firewall.guarded(["10.0.0.5"], {"10.0.0.5", "127.0.0.1"}) == ["10.0.0.5", "127.0.0.1", "::1"]
    assert firewall.guarded(["10.0.0.5"], {"10.0.0.9", "127.0.0.1"}) == ["10.0.0.5"]
