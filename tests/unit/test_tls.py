"""The server's TLS context: built from the settings, each unusable file a start error naming
it, and a reload that swaps the certificate of the context in use or keeps the old one.
Handshakes run in memory (`ssl.MemoryBIO`): no socket, real OpenSSL on both sides."""

from __future__ import annotations

import contextlib
import logging
import ssl
from dataclasses import replace
from pathlib import Path

import pytest

from adapter.config import ClientAuth, ConfigError, Settings
from adapter.http.tls import peer_context, reload, reload_client_ca, server_context
from tests.certificates import Pair, TestCA, serial_of


@pytest.fixture
def ca(tmp_path: Path) -> TestCA:
    return TestCA(tmp_path)


def _settings(pair: Pair, client_ca: str = "", client_auth: ClientAuth = "optional") -> Settings:
    return replace(
        Settings(),
        tls_cert_file=str(pair.cert),
        tls_key_file=str(pair.key),
        tls_client_ca_file=client_ca,
        tls_client_auth=client_auth,
    )


def _handshake(
    server: ssl.SSLContext, client: ssl.SSLContext, server_hostname: str
) -> tuple[ssl.SSLObject, ssl.SSLObject]:
    """A TLS handshake in memory between `client` (asking for `server_hostname`) and
    `server`; (client side, server side). A certificate the client refuses raises."""
    pipes = [ssl.MemoryBIO() for _ in range(4)]
    near = client.wrap_bio(pipes[0], pipes[1], server_hostname=server_hostname)
    far = server.wrap_bio(pipes[2], pipes[3], server_side=True)
    for _ in range(10):
        for side in (near, far):
            with contextlib.suppress(ssl.SSLWantReadError):
                side.do_handshake()
        pipes[2].write(pipes[1].read())
        pipes[0].write(pipes[3].read())
    return near, far


def _presented_serial(server: ssl.SSLContext, ca: TestCA, client: Pair | None = None) -> int:
    """Handshake a client trusting `ca` with `server` in memory; the serial it was shown.
    With `client`, the client presents that pair and the server must have verified it."""
    trusting = ssl.create_default_context(cafile=str(ca.path))
    if client is not None:
        trusting.load_cert_chain(client.cert, client.key)
    near, far = _handshake(server, trusting, "localhost")
    cert = near.getpeercert(binary_form=True)
    assert cert is not None
    if client is not None:
        verified = far.getpeercert()
        assert verified, "the server did not verify the client's certificate"
        assert serial_of(far.getpeercert(binary_form=True) or b"") == client.serial
    return serial_of(cert)


def test_no_certificate_means_plain_http() -> None:
    assert server_context(Settings()) is None


def test_the_context_presents_the_configured_certificate(ca: TestCA) -> None:
    pair = ca.server("server")
    context = server_context(_settings(pair))
    assert context is not None
    assert context.verify_mode is ssl.CERT_NONE  # no client CA: no client certificate asked
    assert _presented_serial(context, ca) == pair.serial


@pytest.mark.parametrize(
    ("client_auth", "mode"), [("optional", ssl.CERT_OPTIONAL), ("required", ssl.CERT_REQUIRED)]
)
def test_a_client_ca_asks_for_client_certificates(
    ca: TestCA, client_auth: ClientAuth, mode: ssl.VerifyMode
) -> None:
    settings = _settings(ca.server("server"), str(ca.path), client_auth)
    context = server_context(settings)
    assert context is not None
    assert context.verify_mode is mode
    _presented_serial(context, ca, ca.client("bot", "ingest-bot"))


def test_each_unusable_file_is_a_start_error_naming_it(ca: TestCA, tmp_path: Path) -> None:
    pair, other = ca.server("server"), ca.server("other")
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n")
    cases = {
        "tls_cert_file .*missing.crt: cannot be read": replace(pair, cert=tmp_path / "missing.crt"),
        "tls_key_file .*missing.key: cannot be read": replace(pair, key=tmp_path / "missing.key"),
        "tls_cert_file .*garbage.pem: not a PEM certificate": replace(pair, cert=garbage),
        "tls_key_file .*server.pem: not an unencrypted PEM private key": replace(
            pair, key=pair.cert
        ),
        "is not the key of tls_cert_file .*KEY_VALUES_MISMATCH": replace(pair, key=other.key),
    }
    for message, broken in cases.items():
        with pytest.raises(ConfigError, match=message):
            server_context(_settings(broken))
    with pytest.raises(ConfigError, match=r"tls_client_ca_file .*garbage\.pem"):
        server_context(_settings(pair, client_ca=str(garbage)))


def test_an_encrypted_key_is_refused_not_prompted_for(ca: TestCA) -> None:
    from cryptography.hazmat.primitives import serialization

    pair = ca.server("server")
    key = serialization.load_pem_private_key(pair.key.read_bytes(), password=None)
    pair.key.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"secret"),
        )
    )
    with pytest.raises(ConfigError, match="not an unencrypted PEM private key"):
        server_context(_settings(pair))


def test_a_reload_swaps_the_certificate_in_the_same_context(ca: TestCA) -> None:
    first = ca.server("server")
    settings = _settings(first)
    context = server_context(settings)
    assert context is not None
    second = ca.server("server")  # the same files, rewritten as a rotation does
    assert reload(context, settings)
    assert _presented_serial(context, ca) == second.serial != first.serial


def test_a_failed_reload_keeps_the_old_certificate_and_says_so(
    ca: TestCA, caplog: pytest.LogCaptureFixture
) -> None:
    first = ca.server("server")
    settings = _settings(first)
    context = server_context(settings)
    assert context is not None
    other = ca.server("other")
    # A new certificate beside the old key: loaded alone, it would be served with a key that
    # is not its own (every handshake failing) had the pair been loaded straight into use.
    first.cert.write_bytes(other.cert.read_bytes())
    with caplog.at_level(logging.ERROR):
        assert not reload(context, settings)
    assert _presented_serial(context, ca) == first.serial
    [line] = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert line.startswith("TLS certificate not reloaded, the previous one stays in use: ")


def test_a_ca_removed_from_the_client_ca_file_is_refused_after_a_reload(
    ca: TestCA, tmp_path: Path
) -> None:
    """The client CA file lists two CAs, then only one: a client of the removed CA is refused
    from the reload on, by the same context in use; the other CA's clients are verified."""
    kept, removed = TestCA(tmp_path / "kept", "kept CA"), TestCA(tmp_path / "gone", "gone CA")
    bundle = tmp_path / "clients.pem"
    bundle.write_bytes(kept.path.read_bytes() + removed.path.read_bytes())
    context = server_context(_settings(ca.server("server"), str(bundle), "required"))
    assert context is not None
    staying, leaving = kept.client("staying", "staying"), removed.client("leaving", "leaving")
    _presented_serial(context, ca, leaving)
    bundle.write_bytes(kept.path.read_bytes())
    assert reload_client_ca(context, _settings(ca.server("server"), str(bundle), "required"))
    _presented_serial(context, ca, staying)
    with pytest.raises(ssl.SSLError):
        _presented_serial(context, ca, leaving)


def test_peers_are_verified_against_the_peer_ca_alone_without_names(
    ca: TestCA, tmp_path: Path
) -> None:
    """A forwarding client trusts the deployment's CA and reaches peers at an address the
    certificate does not name (a pod's IP): the chain is checked, the name is not."""
    assert peer_context(Settings()) is None  # the system's trust store, names checked
    context = peer_context(replace(Settings(), tls_peer_ca_file=str(ca.path)))
    assert context is not None
    assert context.verify_mode is ssl.CERT_REQUIRED
    assert context.check_hostname is False
    served = server_context(_settings(ca.server("peer.pem", ("durable-kafka.streams.svc",))))
    assert served is not None
    _handshake(served, context, "10.1.2.3")  # verifies: the chain is the CA's
    stranger = TestCA(tmp_path / "other")
    other = server_context(_settings(stranger.server("stranger.pem")))
    assert other is not None
    with pytest.raises(ssl.SSLCertVerificationError):
        _handshake(other, context, "10.1.2.3")


def test_an_unusable_peer_ca_is_a_start_error(tmp_path: Path) -> None:
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate")
    for path, why in ((junk, "not PEM CA certificates"), (tmp_path / "absent", "cannot be read")):
        with pytest.raises(ConfigError, match=f"tls_peer_ca_file {path}: {why}"):
            peer_context(replace(Settings(), tls_peer_ca_file=str(path)))
