"""Errors of the binaries builder: each message says what is wrong and what to do."""

from rne_tools.errors import RneError


class BuildError(RneError):
    """Base class: a problem the user can fix (bad option, missing tool, failed step)."""


class PreflightError(BuildError):
    """Required tools are missing; the message lists all of them with how to get each."""


class PatchError(BuildError):
    """A patch of the series does not apply; ``files`` names the files that conflict."""

    def __init__(self, message: str, patch: str, files: list[str]) -> None:
        super().__init__(message)
        self.patch = patch
        self.files = files


class ManifestError(BuildError):
    """A manifest is missing or malformed, or staged artifacts do not match it."""
