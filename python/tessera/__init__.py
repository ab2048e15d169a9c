"""A Python client for ``tessera serve``'s HTTP API, and a reader for ``tessera simulate --json``
results.

    >>> from tessera import Client, JobSpec
    >>> c = Client()                       # TESSERA_ADDR, TESSERA_TOKEN, TESSERA_CA
    >>> job = c.submit(JobSpec(name="hello", command=["echo", "hi"], resources={"gpus": 1}))
    >>> c.wait(job.id).state
    'succeeded'

Standard library only; pandas is needed (and imported) only by ``tessera.frames``.
"""
from ._version import __version__
from .client import Client
from .errors import (ApiError, BadRequest, Conflict, Forbidden, NotFound, PayloadTooLarge,
                     ServiceUnavailable, TesseraConnectionError, TesseraError, TesseraTimeout,
                     TooManyRequests, Unauthorized, Unschedulable)
from .frames import (cdf_frame, share_series_frame, summary_frame, tenants_frame,
                     usage_frame)
from .logs import LogChunk
from .models import (Allocation, Caller, Job, JobEvent, Node, Queue, StateChange, Usage,
                     UsageRow)
from .results import (SimulationResult, cdf_records, read_result, read_results,
                      share_series_records, summary_record, tenant_records, usage_records)
from .spec import TERMINAL_STATES, Gang, JobSpec, JobState, Resources, Sla

__all__ = [
    "__version__", "Client",
    "JobSpec", "Gang", "Resources", "Sla", "JobState", "TERMINAL_STATES",
    "Job", "Allocation", "JobEvent", "StateChange", "Usage", "UsageRow", "Queue", "Node",
    "Caller", "LogChunk",
    "TesseraError", "TesseraConnectionError", "TesseraTimeout", "ApiError", "BadRequest",
    "Unauthorized", "Forbidden", "NotFound", "Conflict", "PayloadTooLarge", "Unschedulable",
    "TooManyRequests", "ServiceUnavailable",
    "SimulationResult", "read_result", "read_results", "summary_record", "tenant_records",
    "usage_records", "share_series_records", "cdf_records",
    "summary_frame", "tenants_frame", "usage_frame", "share_series_frame", "cdf_frame",
]
