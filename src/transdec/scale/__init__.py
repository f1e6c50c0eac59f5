"""Batch transcription on a Ray cluster (``transdec transcribe --ray``; docs/scale.md).

:func:`ray_transcribe` reads audio in CPU tasks and transcribes it in an actor pool of model replicas with Ray
Data, and writes what ``transdec transcribe`` writes. Ray is an optional dependency (``pip install
'transdec[ray]'``), imported only when a run starts.
"""

from transdec.scale.cluster import INSTALL, RayNotInstalled
from transdec.scale.jobs import ray_transcribe
from transdec.scale.options import RayOptions, ReplicaPlan, plan_replicas
from transdec.scale.replica import NamedModel, ReplicaLoader

__all__ = ["INSTALL", "NamedModel", "RayNotInstalled", "RayOptions", "ReplicaLoader", "ReplicaPlan",
           "plan_replicas", "ray_transcribe"]
