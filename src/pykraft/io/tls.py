"""TLS for SSL listeners (issue 16): the server's SSLContext from Kafka's ssl.* properties, and the
principal of a connection.

- ``ssl.keystore.location``: a PEM file with the certificate chain and the private key
  (``ssl.keystore.type=PEM``, Kafka's PEM keystore), the key decrypted with ``ssl.key.password``;
- ``ssl.truststore.location``: PEM CA certificates the client certificates must chain to;
- ``ssl.client.auth``: ``none`` (no client certificate asked), ``requested`` (verified when sent),
  ``required`` (the handshake fails without a trusted one);
- ``ssl.enabled.protocols``: TLSv1.2 and/or TLSv1.3.

The principal of a connection is ``User:ANONYMOUS`` without a client certificate, else ``User:`` and
the certificate's subject in RFC 2253 form (``CN=alice,OU=eng,O=pykraft``), as Kafka's default
``ssl.principal.mapping.rules`` (``DEFAULT``) names it.
"""

from __future__ import annotations

import ssl
from typing import Any

from pykraft.core.config import SslConfig

ANONYMOUS = "User:ANONYMOUS"
_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_RDN_NAMES = {
    "commonName": "CN",
    "organizationalUnitName": "OU",
    "organizationName": "O",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}


class TlsConfigError(ValueError):
    """One line naming the property and file that is wrong."""


def server_context(config: SslConfig) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    versions = sorted(_VERSIONS[p] for p in config.enabled_protocols)
    context.minimum_version, context.maximum_version = versions[0], versions[-1]
    _load_keystore(context, config)
    if config.truststore_location is not None:
        try:
            context.load_verify_locations(cafile=config.truststore_location)
        except (FileNotFoundError, ssl.SSLError) as exc:
            raise TlsConfigError(
                f"ssl.truststore.location: {config.truststore_location}: {getattr(exc, 'reason', None) or exc}"
            ) from None
    context.verify_mode = {
        "none": ssl.CERT_NONE,
        "requested": ssl.CERT_OPTIONAL,
        "required": ssl.CERT_REQUIRED,
    }[config.client_auth]
    return context


def client_context(config: SslConfig) -> ssl.SSLContext:
    """TLS for the connections a node opens to other nodes' SSL listeners: it trusts
    ``ssl.truststore.location`` (else the system's CAs), checks the peer's name as Kafka's default
    ``ssl.endpoint.identification.algorithm=https`` does, and presents the keystore's certificate so a
    listener with ``ssl.client.auth=required`` accepts the node."""
    try:
        context = ssl.create_default_context(cafile=config.truststore_location)
    except (FileNotFoundError, ssl.SSLError) as exc:
        raise TlsConfigError(
            f"ssl.truststore.location: {config.truststore_location}: {getattr(exc, 'reason', None) or exc}"
        ) from None
    versions = sorted(_VERSIONS[p] for p in config.enabled_protocols)
    context.minimum_version, context.maximum_version = versions[0], versions[-1]
    if config.keystore_location is not None:
        _load_keystore(context, config)
    return context


def _load_keystore(context: ssl.SSLContext, config: SslConfig) -> None:
    try:
        context.load_cert_chain(config.keystore_location or "", password=config.key_password)
    except FileNotFoundError:
        raise TlsConfigError(f"ssl.keystore.location: {config.keystore_location}: no such file") from None
    except ssl.SSLError as exc:
        # Never the password itself: only that the key could not be read with it.
        raise TlsConfigError(
            f"ssl.keystore.location: {config.keystore_location}: not a PEM certificate chain and key "
            f"(or ssl.key.password does not decrypt the key): {exc.reason}"
        ) from None


def principal_of(peer_certificate: dict[str, Any] | None) -> str:
    """``User:<subject DN in RFC 2253 order>`` of a verified client certificate (``getpeercert()``),
    else ``User:ANONYMOUS``."""
    if not peer_certificate or not peer_certificate.get("subject"):
        return ANONYMOUS
    # getpeercert() lists the RDNs in the certificate's order; RFC 2253 writes them last first.
    parts = []
    for rdn in reversed(peer_certificate["subject"]):
        parts.append("+".join(f"{_RDN_NAMES.get(name, name)}={_escape(value)}" for name, value in rdn))
    return "User:" + ",".join(parts)


def _escape(value: str) -> str:
    out = "".join("\\" + c if c in ',+"\\<>;' else c for c in value)
    if out.startswith((" ", "#")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out
