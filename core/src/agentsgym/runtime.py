"""The runtime kit of agentsgym, for those who build servers, trainers and other
producers of episodes (env authors need only :mod:`agentsgym`).

It holds the episode protocol and its recorder (:class:`EpisodeSession`,
:class:`EpisodeRecorder`), the driving of agents (:func:`play_until`), how an env's hooks
are called (:class:`HookRuntime` on a :class:`WorkerPool`), and the pieces trainers and
clients of env servers share. Its names are listed once, in ``runtime.pyi``; each is
imported on first access.
"""

from __future__ import annotations

from agentsgym.lazy_api import public_names

__getattr__, __dir__, __all__ = public_names(
    __name__,
    __file__,
    guide="its names are listed in agentsgym.runtime.__all__; an env author's are in "
    "agentsgym.__all__ (docs/python-api.md says which API is which)",
)
