"""Error hierarchy of the tooling library.

Every error a user can fix (bad checkpoint, impossible export options, a failed check) is an
``RneError`` subclass whose message says what is wrong and what to do; CLIs print it without a
traceback and exit non-zero.
"""


class RneError(Exception):
    """Base class of every error raised on purpose by ``rne_tools``."""


class CheckpointError(RneError):
    """A checkpoint directory or config does not match what the architecture needs."""


class ExportError(RneError):
    """Export options are invalid, or lowering/serialisation failed."""


class VerificationError(RneError):
    """An exported program does not compute what the eager model computes."""


class RegistryError(RneError):
    """The model registry is malformed, or a requested model/variant is not in it."""


class UnsafePathError(RneError):
    """A path built from registry or caller data would leave the directory it belongs in."""
