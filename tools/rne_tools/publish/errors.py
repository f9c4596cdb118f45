"""Errors of the publish and download tooling (``RneError`` subclasses: message says what to do)."""

from rne_tools.errors import RneError


class PublishError(RneError):
    """A variant cannot be published: unverified or stale export, bad token, Hub failure."""


class DownloadError(RneError):
    """A registry variant cannot be fetched, or what was fetched does not match the registry."""
