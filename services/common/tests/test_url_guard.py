"""The SSRF guard: which URLs may be fetched, judged by the addresses their hosts resolve to."""

from __future__ import annotations

import ipaddress
import socket

import pytest
from crayfish_common.url_guard import (
    AllowList,
    UrlRefused,
    parse_target,
    refusal_reason,
    vet_url,
)


def resolver_of(table: dict[str, list[str]]):
    """A resolver answering from a table, the way getaddrinfo answers."""

    def resolve(host: str, port: int, type: int = 0):
        if host not in table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [
            (socket.AF_INET6 if ":" in a else socket.AF_INET, type, 6, "", (a, port))
            for a in table[host]
        ]

    return resolve


PUBLIC = resolver_of({"example.org": ["93.184.215.14"], "both.test": ["93.184.215.14", "10.1.2.3"]})


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://127.0.0.1/", "loopback"),
        ("http://127.8.9.10:8080/x", "loopback"),
        ("http://[::1]/", "loopback"),
        ("http://10.0.0.5/", "private"),
        ("http://172.16.3.4/", "private"),
        ("http://192.168.1.1/", "private"),
        ("http://169.254.169.254/latest/meta-data/", "cloud metadata"),
        ("http://[fd00:ec2::254]/", "cloud metadata"),
        ("http://169.254.1.1/", "link-local"),
        ("http://[fe80::1]/", "link-local"),
        ("http://100.64.0.1/", "CGNAT"),
        ("http://224.0.0.1/", "multicast"),
        ("http://0.0.0.0/", "unspecified"),
        ("http://[::]/", "unspecified"),
        ("http://[::ffff:127.0.0.1]/", "loopback (embedded in IPv6)"),
        ("http://[64:ff9b::a00:1]/", "private (embedded in IPv6)"),
        ("http://2130706433/", "loopback"),  # 127.0.0.1 written as one number
        ("http://0x7f.1/", "loopback"),
    ],
)
def test_non_public_addresses_are_refused_by_default(url: str, reason: str) -> None:
    with pytest.raises(UrlRefused, match="refused to fetch") as caught:
        vet_url(url)
    assert reason in str(caught.value)


def test_a_name_resolving_to_loopback_is_refused() -> None:
    with pytest.raises(UrlRefused, match=r"localhost \((127\.0\.0\.1|::1)\): loopback"):
        vet_url("http://localhost:8080/")


def test_one_private_address_among_public_ones_refuses_the_name() -> None:
    with pytest.raises(UrlRefused, match=r"both\.test \(10\.1\.2\.3\): private"):
        vet_url("https://both.test/", resolver=PUBLIC)


def test_public_name_is_vetted_with_its_addresses() -> None:
    vetted = vet_url("https://Example.ORG/page?q=1", resolver=PUBLIC)
    assert vetted.target.host == "example.org"
    assert vetted.target.port == 443
    assert vetted.addresses == ("93.184.215.14",)
    assert not vetted.allow_listed


def test_allow_list_permits_exactly_host_and_port() -> None:
    allow = AllowList.parse("127.0.0.1:8080, [::1]:9000,LocalHost:7000")
    assert vet_url("http://127.0.0.1:8080/a", allow).allow_listed
    assert vet_url("http://[::1]:9000/", allow).addresses == ("::1",)
    assert vet_url("http://localhost:7000/", allow).allow_listed
    with pytest.raises(UrlRefused, match=r"allow-list 127\.0\.0\.1:8081"):
        vet_url("http://127.0.0.1:8081/", allow)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("file:///etc/passwd", "only http and https"),
        ("gopher://example.org/", "only http and https"),
        ("example.org/page", "only http and https"),
        ("http:///nohost", "no host"),
        ("http://user:pw@example.org/", "credentials"),
        ("http://example.org:99999/", "malformed"),
        ("http://exa mple.org/", "spaces or control"),
    ],
)
def test_malformed_or_unsupported_urls_are_refused(url: str, message: str) -> None:
    with pytest.raises(UrlRefused, match=message):
        parse_target(url)


def test_unresolvable_name_is_refused_with_the_reason() -> None:
    with pytest.raises(UrlRefused, match=r"cannot resolve 'nowhere\.test'"):
        vet_url("http://nowhere.test/", resolver=PUBLIC)


@pytest.mark.parametrize("entry", ["nohost", "host:", "::1:80", "host:70000"])
def test_malformed_allow_list_entries_are_named(entry: str) -> None:
    with pytest.raises(ValueError, match="allow-list entry"):
        AllowList.parse(entry)


def test_public_addresses_pass() -> None:
    for text in ("8.8.8.8", "2606:4700:4700::1111", "1.1.1.1"):
        assert refusal_reason(ipaddress.ip_address(text)) is None
