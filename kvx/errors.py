"""Errors a user can act on. Each carries a one-line message; the CLI prints it without a traceback."""


class KvxError(Exception):
    """Base class: str(err) is the one-line message shown to the user.

    A message about one option writes `{option}` where the option goes and passes option=, the
    field that holds it (e.g. "kv_memory"): str(err) names the field, and the CLI names its flag
    instead (kvx/cli/options.py flag), so no library layer spells a command-line flag."""

    exit_code = 2

    def __init__(self, message: str = "", *, option: str | None = None):
        self.option = option
        self.template = message
        super().__init__(self.naming(option) if option else message)

    def naming(self, name: str) -> str:
        """The message with the option called `name`."""
        return self.template.replace("{option}", name)


def one_line(err: object, limit: int) -> str:
    """An error's text (a library's, often several lines) as one line of at most `limit` characters."""
    return " ".join(str(err).split())[:limit]


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
