"""The real runtime told its context is KVX_TEST_CONTEXT tokens (KVX_RUNTIME_FACTORY =
"kvx_short_context_runtime:short_context_runtime"): a prompt that leaves less room than a record
needs, without writing an 8,000-token text."""
import os

from kvx.job.runtime import real_runtime


def short_context_runtime(schema, opts):
    runtime = real_runtime(schema, opts)
    runtime.max_model_len = int(os.environ["KVX_TEST_CONTEXT"])
    return runtime
