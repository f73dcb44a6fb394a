"""The grammar coverage benchmark's parts: the schema corpus (sources, collection, instances with
jsonschema labels), the engines compared (kvx, llguidance, xgrammar), the compile workers with a hard
timeout, and the report. Entry points: scripts/collect_schemas.py and benchmarks/grammar_coverage.py."""
