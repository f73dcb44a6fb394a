"""Library errors name an option by its field (kv_memory); the command line shows its flag."""
import pickle

from kvx.cli.options import flag, user_message
from kvx.errors import CapacityError, ConfigError


def test_field_names_become_flags():
    assert flag("kv_dtype") == "--kv-dtype" and flag("dtype") == "--dtype"
    assert flag("speculative_tokens") == "--speculate"  # EngineConfig's name for --speculate


def test_library_message_names_the_field_and_the_cli_the_flag():
    err = CapacityError("{option} 2.0GiB is more than the free memory; ask for less", option="kv_memory")
    assert str(err) == "kv_memory 2.0GiB is more than the free memory; ask for less"
    assert user_message(err) == "--kv-memory 2.0GiB is more than the free memory; ask for less"


def test_an_error_without_option_is_shown_as_written():
    assert user_message(ConfigError("bad {braces} kept")) == "bad {braces} kept"


def test_option_survives_pickling():  # errors cross from Ray replicas to the driver
    err = pickle.loads(pickle.dumps(ConfigError("{option} 'x': expected auto", option="kv_dtype")))
    assert user_message(err) == "--kv-dtype 'x': expected auto" and str(err) == "kv_dtype 'x': expected auto"
