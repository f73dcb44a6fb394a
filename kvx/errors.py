"""Errors a user can act on. Each carries a one-line message; the CLI prints it without a traceback."""


class KvxError(Exception):
    """Base class: str(err) is the one-line message shown to the user."""

    exit_code = 2


class ModelError(KvxError):
    """A model path is missing, unreadable, corrupt, or of an unsupported architecture."""


class ConfigError(KvxError):
    """A bad option value (memory size, dtype, backend name...)."""


class CapacityError(KvxError):
    """The KV pool cannot hold even one sequence of the requested size."""


class OutputError(KvxError):
    """Writing the output failed (disk full, file removed, ...): the run stops; committed rows stay."""


class OutputClosed(KvxError):
    """Whoever read our stdout went away (`kvx ... | head -1`): stop quietly, like a tool killed by SIGPIPE."""

    exit_code = 141  # 128 + SIGPIPE, what the shell reports for `yes | head -1`
