"""Which query arguments of an address may be credentials, and the address without them.

A token in a page's address (``?token=``, Jupyter's own way in) is a credential wherever the
address goes next: a log line, a ``Location`` header, the ``next`` of a login. One rule says
which arguments those are, for every place that writes an address out.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

#: A query argument whose name holds one of these may carry a credential (``token``,
#: ``access_token``, ``_xsrf``, ``api_key``, ``password``, an OAuth ``code`` or ``state`` ...).
SECRET_WORDS = ("token", "auth", "key", "secret", "xsrf", "code", "state", "pass", "session")


def is_secret(name: str) -> bool:
    """Whether the query argument ``name`` may carry a credential."""
    lowered = name.lower()
    return any(word in lowered for word in SECRET_WORDS)


def scrub_query(uri: str) -> str:
    """``uri`` with the value of every credential-like query argument replaced (for logs)."""
    path, sep, query = uri.partition("?")
    if not sep:
        return uri
    parts = []
    for part in query.split("&"):
        key, eq, _ = part.partition("=")
        parts.append(f"{key}{eq}[secret]" if is_secret(key) and eq else part)
    return f"{path}?{'&'.join(parts)}"


def without_credentials(uri: str) -> str:
    """``uri`` less its credential-like query arguments (for where a browser goes next)."""
    parts = urlsplit(uri)
    kept = [
        (key, value)
        for key, value in parse_qsl(parts.query, keep_blank_values=True)
        if not is_secret(key)
    ]
    return urlunsplit(parts._replace(query=urlencode(kept)))
