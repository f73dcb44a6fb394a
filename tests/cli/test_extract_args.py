"""`kvx extract`'s parameters and ExtractArgs' fields are the same names: an option added to one
and not the other fails here, not at the user's first run."""
import dataclasses
import inspect

import pytest

from kvx.cli.extract import extract
from kvx.cli.extract_args import ExtractArgs


def test_every_option_is_a_field_and_every_field_an_option():
    params = list(inspect.signature(extract).parameters)
    fields = [f.name for f in dataclasses.fields(ExtractArgs)]
    assert params == fields


def test_from_options_ignores_other_locals_and_misses_none():
    options = {f.name: f.name for f in dataclasses.fields(ExtractArgs)}
    args = ExtractArgs.from_options({**options, "helper": 1})
    assert args.kv_dtype == "kv_dtype" and not hasattr(args, "helper")
    del options["threads"]
    with pytest.raises(KeyError, match="threads"):
        ExtractArgs.from_options(options)


def _defaults(**given) -> ExtractArgs:
    """The command's defaults (typer keeps each in its OptionInfo / ArgumentInfo), then `given`."""
    options = {name: getattr(p.default, "default", p.default) for name, p in inspect.signature(extract).parameters.items()}
    return ExtractArgs.from_options({**options, **given})


@pytest.mark.parametrize("output,numbers", [("out.parquet", "parquet"), ("out.jsonl", "json"), (None, "json")])
def test_a_parquet_output_keeps_numbers_its_columns_hold(output, numbers):
    """Its integer columns are int64, its number columns float64: a record past what they hold
    could only be retried, so the grammar writes none (kvx/grammar/options.py Numbers)."""
    from kvx.cli.run import engine_options

    args = _defaults(input="in.jsonl", schema="s.json", output=output, replicas=2)  # 2: no local engine check
    assert engine_options(args).grammar.numbers == numbers
