"""The application pipeline, usable as a library (benchmarks/extract.py does): input records ->
prompts -> engine requests -> results -> validation and retries -> rows. kvx/cli only parses the
command line, checks it, reports and exits."""
